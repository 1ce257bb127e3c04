import type { Request, Response } from 'express';
import type { DeviceSummary, Principal } from '@fleet/contracts';
import { ApiError, JsonBody, NotDeliveredError, NotFoundError, RateLimitedError, ServiceUnavailableError, UnauthorizedError, ValidationError, fromEnvelopeError, warnIfFails, type Bus, type Logger } from '@fleet/service-kit';
import { bearerToken, type Authenticator } from '../auth/authenticator';
import { accountBody } from '../handlers/account';
import { isValidIdempotencyKey, requestFingerprint, type BeginResult, type IdempotencyStore, type StoredResponse } from '../idempotency';
import { rateLimitHeaders, requestWindowFor, windowsFor, type HitResult, type LimitClass, type LimitSettings, type SlidingWindowLimiter, type WindowSpec, type WindowState } from '../limits';
import type { ScopeResolver } from '../scope/scope-resolver';
import { routeId, type RouteDef } from '../routes/types';
import { MAX_BODY_DEPTH, readJsonBody, withinDepth, type RequestValidator } from './request-validation';
import { checkAccess, checkPermission } from './access';
import { countRefusal } from './request-metrics';
import { relayUpload } from './upload';
import { sendJson } from './answer-encoding';
import { relayStream, type OpenStreams, type StillAllowed } from './stream';
import type { RouteMatcher } from './route-matcher';

export interface PipelineDeps {
  matcher: RouteMatcher;
  validator: RequestValidator;
  authenticator: Authenticator;
  limiter: SlidingWindowLimiter;
  limitSettings: LimitSettings;
  idempotency: IdempotencyStore;
  scope: ScopeResolver;
  bus: Bus;
  logger: Logger;
  /**
   * How long past a request's deadline the gateway still waits for the owning service's reply
   * on routes that change something (BUS_OUTCOME_GRACE_MS); default 0.
   */
  outcomeGraceMs?: number;
  /** How long past the deadline it waits once the owning service said it is committing (BUS_COMMIT_WAIT_MS); default 0. */
  commitWaitMs?: number;
  /** The live event streams open through this gateway (ended on shutdown). */
  streams: OpenStreams;
  /** The upstream head and idle timeouts of event streams (tests shorten them). */
  streamTimeouts?: { headMs: number; idleMs: number };
}

/** Headers of a handler's answer that a replay repeats; per-request ones are written afresh. */
const REPLAYED_HEADERS = ['location', 'content-location'];

/**
 * The response a request produced, before it is written (so it can be kept for replays).
 * `current` marks an answer its owner gave for a request it recognised as one already made (a
 * file push's key after 24 hours): the resource's state now, which a later retry must read
 * again, so it is not kept for replay.
 */
type Outcome = StoredResponse & { current?: true };

/**
 * Every /v1 request, in the spec's order: route, authentication, the partner's request
 * window, idempotent replay, permission, media type and validation, device scope, the
 * route's limit classes, then the answer from the gateway itself or the owning service.
 */
export function apiPipeline(deps: PipelineDeps) {
  return async function handleApiRequest(req: Request, res: Response): Promise<void> {
    const requestId = res.locals.requestId as string;
    const found = deps.matcher.matchRequest(req);
    if (found.kind !== 'found') {
      await countAgainstCaller(deps, req, res);
      if (found.kind === 'none') throw new ApiError(404, 'unknown_route', `No route matches ${req.method} ${req.path}.`);
      res.setHeader('Allow', found.allow.join(', '));
      throw new ApiError(405, 'method_not_allowed', `${req.method} is not allowed here; allowed: ${found.allow.join(', ')}.`);
    }
    const { route, params } = found.match;
    res.locals.routeTemplate = route.path;

    const principal = await authenticate(deps, req, res);
    const spend = new RequestSpend(deps, principal, res);
    if ('upload' in route.target) {
      await spend.requestWindow();
      checkPermission(route, principal);
      await relayUpload(deps, req, res, route, principal, requestId);
      return;
    }
    if ('stream' in route.target) {
      // Opening a stream spends one request, like any route; the stream itself has no timeout.
      await spend.requestWindow();
      checkPermission(route, principal);
      const body = readJsonBody(route, req.get('Content-Type'), Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0));
      const query = { ...(req.query as Record<string, unknown>) };
      deps.validator.check(route, { params, query, body });
      await relayStream(deps, req, res, route, params, query, principal, requestId, streamHolderCheck(deps, req, route));
      return;
    }

    const rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const idempotencyKey = route.idempotent ? req.get('Idempotency-Key') : undefined;
    let held: { scope: string; key: string; fingerprint: string } | undefined;
    if (idempotencyKey !== undefined) {
      if (!isValidIdempotencyKey(idempotencyKey)) {
        await spend.requestWindow();
        checkAccess(route, principal, params, rawBody);
        throw new ValidationError("invalid 'Idempotency-Key': 1 to 255 printable ASCII characters");
      }
      const scope = `${principal.partner_id}:${routeId(route)}`;
      const fingerprint = requestFingerprint({ method: req.method, path: req.path, query: req.query, body: bodyForFingerprint(rawBody) });
      const begun = await claimKeyAndSpendWindow(deps, spend, scope, idempotencyKey, fingerprint);
      if (begun.kind === 'replay') {
        await writeOutcome(req, res, route, begun.response, true);
        return;
      }
      // Only a replay skips the permission check; a refusal of the key comes after it.
      if (begun.kind !== 'started') checkAccess(route, principal, params, rawBody);
      if (begun.kind === 'in_progress') {
        throw new ApiError(409, 'idempotency_in_progress', 'A request with this Idempotency-Key is still running.', { retryAfter: begun.retryAfterSeconds });
      }
      if (begun.kind === 'mismatch') {
        throw new ApiError(422, 'idempotency_key_reused', 'This Idempotency-Key was used with a different request.');
      }
      held = { scope, key: idempotencyKey, fingerprint };
    }

    let outcome: Outcome;
    try {
      outcome = await runRoute(deps, req, route, params, principal, rawBody, requestId, spend);
    } catch (err) {
      if (held) await deps.idempotency.release(held.scope, held.key).catch(warnIfFails(deps.logger, 'releasing the idempotency key', { request_id: requestId }));
      // A request refused before it reached its limits still counts, and a full request window
      // answers 429 ahead of that refusal (the spec's order puts the window first).
      await spend.requestWindow();
      throw err;
    }
    if (held && outcome.current) await deps.idempotency.release(held.scope, held.key).catch(warnIfFails(deps.logger, 'releasing the idempotency key', { request_id: requestId }));
    else if (held) await keepForReplay(deps, held, outcome, requestId);
    await writeOutcome(req, res, route, outcome, false);
  };
}

/**
 * Keeps a finished request's answer for its Idempotency-Key. The request has already had its
 * effect (a command published, a device created), so a failure to keep the answer must not
 * turn it into a 503 or free the key: the partner gets the real answer, and the key stays held
 * until its lock runs out, so a retry in that time is 409 `idempotency_in_progress`, not a
 * second command.
 */
async function keepForReplay(deps: PipelineDeps, held: { scope: string; key: string; fingerprint: string }, outcome: Outcome, requestId: string): Promise<void> {
  try {
    await dependency(deps.idempotency.complete(held.scope, held.key, held.fingerprint, storable(outcome)));
  } catch (err) {
    deps.logger.warn({ err, request_id: requestId, status: outcome.status }, 'the answer could not be kept for replay; its Idempotency-Key stays held until the lock expires');
  }
}

/**
 * The idempotency claim and the request window in one round trip: both commands are sent
 * together. A replay spends from the request window like any request, and a full window
 * answers 429 ahead of everything else, so the claim of a request the window refused is
 * released.
 */
async function claimKeyAndSpendWindow(deps: PipelineDeps, spend: RequestSpend, scope: string, key: string, fingerprint: string): Promise<BeginResult> {
  const [windowRefusal, claim] = await Promise.all([
    spend.requestWindow().then(
      () => undefined,
      (err: unknown) => err ?? new Error('request window'),
    ),
    dependency(deps.idempotency.begin(scope, key, fingerprint)).then(
      (begun) => ({ begun }),
      (err: unknown) => ({ err }),
    ),
  ]);
  if (windowRefusal !== undefined) {
    if ('begun' in claim && claim.begun.kind === 'started') {
      await deps.idempotency.release(scope, key).catch(warnIfFails(deps.logger, 'releasing the idempotency key'));
    }
    throw windowRefusal;
  }
  if ('err' in claim) throw claim.err;
  return claim.begun;
}

/**
 * What one request spends from Redis. The partner's request window and the route's limit
 * classes go to Redis in one round trip (the limiter's stages) once the request has passed
 * its checks, rather than one trip before the checks and another after them; a request that
 * is refused earlier, or needs the window sooner (an idempotent replay, an upload), spends the
 * window alone at that point. Either way it is spent exactly once per request.
 */
class RequestSpend {
  private spent = false;

  constructor(
    private readonly deps: PipelineDeps,
    private readonly principal: Principal,
    private readonly res: Response,
  ) {}

  /** Spends the request window if nothing did yet; 429 when it is full. */
  async requestWindow(): Promise<void> {
    if (this.spent) return;
    await this.withClasses([]);
  }

  /**
   * Spends the route's limit-class windows, with the request window in the same round trip
   * when it is not spent yet; 429 naming whichever refused (the request window first).
   */
  async withClasses(classWindows: WindowSpec[]): Promise<Spent | undefined> {
    const window = requestWindowFor({ partnerId: this.principal.partner_id, requestsPerMin: this.principal.limits.requests_per_min });
    const withWindow = !this.spent;
    const stages = [...(withWindow ? [[window]] : []), ...(classWindows.length ? [classWindows] : [])];
    if (stages.length === 0) return undefined;
    // Marked before the call: a request whose spend failed (Redis away, 503) is not tried again.
    this.spent = true;
    const results = await dependency(this.deps.limiter.hitStages(stages));
    if (withWindow) {
      const state = (results[0] as HitResult).windows[0] as WindowState;
      // Retry-After goes with the 429 error, which sets it from the same state.
      for (const [name, value] of Object.entries(rateLimitHeaders(state))) if (name !== 'Retry-After') this.res.setHeader(name, value);
      if (!state.allowed) {
        countRefusal();
        throw new RateLimitedError('Request rate limit reached; honor Retry-After.', state.retryAfterSeconds);
      }
    }
    if (classWindows.length === 0) return undefined;
    const classes = results[results.length - 1] as HitResult;
    if (!classes.allowed) {
      countRefusal(classes.refusedBy?.key);
      throw new RateLimitedError('A limit for this operation was reached; honor Retry-After.', classes.refusedBy?.retryAfterSeconds ?? 1);
    }
    return classes.receipt ? { windows: classWindows, receipt: classes.receipt } : undefined;
  }
}

/** A failure of Redis or the key store is the gateway's own outage: 503, never a 500. */
async function dependency<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ServiceUnavailableError();
  }
}

/**
 * For an open stream: whether the key that opened it still authenticates and still holds the
 * route's permission (a revoked key or a withdrawn permission ends the stream, as it would
 * refuse the next request). A key store that cannot be reached throws: the stream is kept.
 */
function streamHolderCheck(deps: PipelineDeps, req: Request, route: RouteDef): StillAllowed {
  const token = bearerToken(req.get('Authorization')) ?? '';
  return async () => {
    const principal = await deps.authenticator.authenticate(token);
    if (!principal) return false;
    try {
      checkPermission(route, principal);
      return true;
    } catch {
      return false;
    }
  };
}

async function authenticate(deps: PipelineDeps, req: Request, res: Response): Promise<Principal> {
  const header = req.get('Authorization');
  const token = bearerToken(header);
  res.locals.keyPresented = keyWasSent(header);
  const principal = token ? await dependency(deps.authenticator.authenticate(token)) : null;
  if (!principal) throw new UnauthorizedError();
  res.locals.keyPrefix = principal.key_prefix;
  return principal;
}

/**
 * Whether the request carried a bearer key, however malformed (the 401 then says
 * `error="invalid_token"`). No header, another scheme (`Basic ...`) or `Bearer` with nothing
 * after it is no key: RFC 6750 §3.1 gives such a request no error code.
 */
function keyWasSent(header: string | undefined): boolean {
  return header !== undefined && /^Bearer[ ]+\S/i.test(header);
}

/**
 * For a request a header or body rule refused before its route's checks (a header sent twice,
 * a query string that is not UTF-8, a Content-Encoding, a body too large): the spec's order
 * still holds where a route matches (the route, then the key, the request window and the
 * permission), so a missing or bad key there is 401 and a key without the route's permission
 * 403, whatever else is wrong with the request; past them the rule's refusal stands. Where no
 * route matches, the key only counts (countAgainstCaller).
 */
export async function callerChecksFirst(deps: PipelineDeps, req: Request, res: Response): Promise<void> {
  const found = deps.matcher.matchRequest(req);
  if (found.kind !== 'found') {
    await countAgainstCaller(deps, req, res);
    return;
  }
  const principal = await authenticate(deps, req, res);
  await spendRequestWindow(deps, principal, res);
  checkAccess(found.match.route, principal, found.match.params, Buffer.alloc(0));
}

/**
 * For a request no route matches (404, 405): a valid key still spends one request of its
 * window and gets its RateLimit-* headers, and a full window answers 429 first (the spec's
 * order puts authentication and the window before the rest). The route comes first, so a
 * missing or bad key does not turn the answer into a 401.
 */
export async function countAgainstCaller(deps: PipelineDeps, req: Request, res: Response): Promise<Principal | undefined> {
  const caller = await authenticate(deps, req, res).catch(() => undefined);
  if (caller) await spendRequestWindow(deps, caller, res);
  return caller;
}

async function spendRequestWindow(deps: PipelineDeps, principal: Principal, res: Response): Promise<void> {
  await new RequestSpend(deps, principal, res).requestWindow();
}

async function runRoute(
  deps: PipelineDeps,
  req: Request,
  route: RouteDef,
  params: Record<string, string>,
  principal: Principal,
  rawBody: Buffer,
  requestId: string,
  spend: RequestSpend,
): Promise<Outcome> {
  checkAccess(route, principal, params, rawBody);
  const body = readJsonBody(route, req.get('Content-Type'), rawBody);
  const query = { ...(req.query as Record<string, unknown>) };
  deps.validator.check(route, { params, query, body });
  // The tier's permission was checked first (checkAccess); here it sets what the request spends.
  const tier = route.tierOf?.({ params, body });

  let device: DeviceSummary | undefined;
  if (route.device && !route.device.ownerResolves) {
    device = await deps.scope.resolve(requestId, principal, params.device_id as string);
    if (route.device.product && device.product !== route.device.product) throw new NotFoundError('Device not found.');
  }
  const limits: LimitClass[] = [...(route.limits ?? []), ...(tier?.destructive ? (['destructive'] as const) : [])];
  const spent = await spend.withClasses(limits.length ? limitWindows(deps, limits, principal, device) : []);

  if ('local' in route.target) return { status: 200, headers: {}, body: accountBody(principal) };
  if ('upload' in route.target) throw new TypeError(`${routeId(route)} streams its body: it is served by the upload pipeline`);
  if ('stream' in route.target) throw new TypeError(`${routeId(route)} answers with a stream: it is served by the stream relay`);
  const idempotencyKey = route.idempotent ? req.get('Idempotency-Key') : undefined;
  const envelope = {
    request_id: requestId,
    route: routeId(route),
    principal,
    params,
    query,
    ...(device ? { device } : {}),
    ...(body !== undefined ? { body } : {}),
    ...(idempotencyKey !== undefined ? { idempotency_key: idempotencyKey } : {}),
  };
  // The envelope carries the deadline: now + the bus timeout. The owning service starts and commits
  // nothing after it (its database refuses the COMMIT). Right before a COMMIT it sends a commit
  // notice; the gateway waits the grace past the deadline for a reply or a notice (covering the
  // bus's latency), and after a notice up to commitWaitMs for the outcome. So a 503 means nothing
  // was stored, unless the service died (or stalled past commitWaitMs) between COMMIT and reply.
  const changes = route.method !== 'GET';
  const waits = changes ? { outcomeGraceMs: deps.outcomeGraceMs ?? 0, commitWaitMs: deps.commitWaitMs ?? 0 } : {};
  // Relayed: a body the owning service wrote as JSON text is written to the partner as it is.
  const reply = await deps.bus.relay(route.target.subject, envelope, waits).catch(async (err: unknown) => {
    // Only a request nobody received is known not to have happened. One that got no answer in
    // time may have (a command published, its reply lost): it stays spent, so the limits hold.
    if (spent && err instanceof NotDeliveredError) await refund(deps, spent, requestId);
    throw err;
  });
  if (!reply.ok) {
    // A refused operation did not happen, so it does not spend from the route's limits.
    if (spent) await refund(deps, spent, requestId);
    throw fromEnvelopeError(reply.error);
  }
  // A request the owner recognised as one already made (a file push's key after 24 hours) is a
  // replay in all but name: like a replay, it spends nothing from the route's limits.
  if (reply.unspent && spent) await refund(deps, spent, requestId);
  return { status: reply.status, headers: reply.headers ?? {}, body: reply.body, ...(reply.unspent ? { current: true as const } : {}) };
}

/**
 * The parsed body when it is JSON (so key order does not matter), else its text. `{}` is no
 * body, as the body reader takes it (a route whose fields are all optional takes either).
 */
function bodyForFingerprint(rawBody: Buffer): unknown {
  if (rawBody.length === 0) return undefined;
  const text = rawBody.toString('utf8');
  try {
    const parsed: unknown = JSON.parse(text);
    if (isEmptyObject(parsed)) return undefined;
    // A body nested too deep for the fingerprint is refused later; its text stands in here.
    return withinDepth(parsed, MAX_BODY_DEPTH) ? parsed : text;
  } catch {
    return text;
  }
}

interface Spent {
  windows: WindowSpec[];
  receipt: string;
}

async function refund(deps: PipelineDeps, spent: Spent, requestId: string): Promise<void> {
  await deps.limiter.refund(spent.windows, spent.receipt).catch(warnIfFails(deps.logger, 'refunding the limit windows', { request_id: requestId }));
}

function limitWindows(deps: PipelineDeps, limits: LimitClass[], principal: Principal, device?: DeviceSummary): WindowSpec[] {
  const ctx = {
    partnerId: principal.partner_id,
    deviceCommandsPerMin: principal.limits.device_commands_per_min,
    ...(device ? { deviceId: device.device_id } : {}),
  };
  return limits.flatMap((cls) => windowsFor(cls, ctx, deps.limitSettings));
}

async function writeOutcome(req: Request, res: Response, route: RouteDef, outcome: Outcome, replayed: boolean): Promise<void> {
  for (const [name, value] of Object.entries(outcome.headers)) {
    if (!replayed || REPLAYED_HEADERS.includes(name.toLowerCase())) res.setHeader(name, value);
  }
  if (replayed) res.setHeader('Idempotent-Replayed', 'true');
  if (route.deprecated) {
    res.setHeader('Deprecation', 'true');
    res.setHeader('Sunset', route.deprecated.sunset);
    res.setHeader('Link', `<${route.deprecated.link}>; rel="deprecation"`);
  }
  res.status(outcome.status);
  if (outcome.status === 204 || outcome.body === undefined) {
    res.end();
    return;
  }
  // A relayed JsonBody goes as the bytes the service wrote; anything else is written here.
  const { body } = outcome;
  await sendJson(req, res, body instanceof JsonBody ? Buffer.from(body.bytes.buffer, body.bytes.byteOffset, body.bytes.byteLength) : JSON.stringify(body));
}

/** An outcome as the idempotency store keeps it: a body relayed as JSON text is kept as its value. */
function storable(outcome: Outcome): Outcome {
  return outcome.body instanceof JsonBody ? { ...outcome, body: outcome.body.parse() } : outcome;
}

const isEmptyObject = (value: unknown): boolean => value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0;
