import { connect, createInbox, headers as natsHeaders, JSONCodec, type Msg, type MsgHdrs, type NatsConnection, type Subscription, ErrorCode, type NatsError } from 'nats';
import CircuitBreaker from 'opossum';
import {
  checkEvent,
  checkReplyBody,
  checkReplyEnvelope,
  checkRequestBody,
  checkRequestEnvelope,
  ContractViolation,
  hasReplySchema,
  type EventSubject,
  type ReplyEnvelope,
  type ReplySuccess,
  type RequestSubject,
} from '@fleet/contracts';
import type { EventOf, HandlerResult, RelayedReplyOf, ReplyOf, RequestHandler, RequestOf, ServiceHandlers } from './bus-types';
import { busMetrics } from './bus-metrics';
import { ACCEPT_HEADER, ACCEPT_SPLIT, encodeWithJsonBody, JsonBody, splitReplyHead, wantsSplitReply } from './json-body';
import { ReplySender, wholeReply } from './reply-parts';
import { currentWork, formatTraceparent, parseTraceparent, startHop, telemetryOn, TRACEPARENT_HEADER, withWork, type Hop } from './trace';

/** The hop of work done with telemetry off: no ids made, nothing ended. */
const UNTRACED: Hop = { context: { traceId: '', spanId: '', sampled: false }, recording: false, end: () => undefined };
import { ApiError, DeadlineExceededError, InternalError, ServiceUnavailableError, ValidationError, isDeadlineExceeded, isStoreOutage, NotDeliveredError, toEnvelopeError } from './errors';
import type { Logger } from './logger';

const codec = JSONCodec<unknown>();
/**
 * A request's NATS headers: its trace context (trace.ts), and for Bus.relay the split form of
 * replies with a JsonBody (json-body.ts). None for a request made outside any traced work.
 */
function requestHeaders(hop: Hop | undefined, keepJsonBody: boolean): MsgHdrs | undefined {
  if (!hop && !keepJsonBody) return undefined;
  const h = natsHeaders();
  if (hop) h.set(TRACEPARENT_HEADER, formatTraceparent(hop.context));
  if (keepJsonBody) h.set(ACCEPT_HEADER, ACCEPT_SPLIT);
  return h;
}

/** A handler's reply as it is sent: the envelope, and a body already written as JSON text. */
interface Outgoing {
  envelope: ReplyEnvelope;
  json?: JsonBody;
}


export interface BusOptions {
  servers: string;
  /** Service name: the connection name and the queue group of its handlers. */
  service: string;
  logger: Logger;
  requestTimeoutMs: number;
  /**
   * Put before every subject on the wire (serve, request, publish, subscribe): tests that share
   * a NATS server isolate themselves with it. Default none.
   */
  subjectPrefix?: string;
}

export interface RequestOptions {
  /** The longest this request may take; default: the bus's requestTimeoutMs. */
  timeoutMs?: number;
  /**
   * The deadline of the request this one is made for (HandlerContext.deadline): the new request
   * gets the earlier of it and now + timeoutMs, never more time than its parent has left.
   */
  deadline?: number;
  /**
   * How long to keep waiting for the reply after the deadline. Work that committed just before
   * the deadline is then still reported, instead of being answered as a 503 that did happen.
   * Default 0.
   */
  outcomeGraceMs?: number;
  /**
   * For requests that may store something: the replier is asked for a commit notice (the
   * envelope's `commit_notice`), and once one arrived the reply is awaited until the deadline plus
   * commitWaitMs (when larger than the grace). A replier that stalls between its COMMIT and its
   * reply then still gets its outcome reported; without a notice by the deadline plus the grace,
   * nothing can have been committed and the request fails as before. Default 0: no notice.
   */
  commitWaitMs?: number;
}

/** The replier's answer to a request that arrived after its deadline: it was not run. */
const arrivedTooLate = () => new ServiceUnavailableError('The request could not be taken up in time; nothing was done. Retry shortly.');

/**
 * The fleet's NATS bus: request handlers in queue groups (so replicas share load), envelope
 * validation on both sides, and requests that fail fast with 503 when the owner is down,
 * slow or failing (a timeout per request plus one circuit breaker per subject).
 *
 * Every request carries a deadline (epoch milliseconds, the envelope's `deadline`): the
 * moment its caller stops waiting. A handler whose request arrives after it is not run (503),
 * the handler sees it in its context, and requests it makes on the request's behalf inherit
 * what is left of it.
 */
export class Bus {
  private readonly breakers = new Map<string, CircuitBreaker<[string, Uint8Array, number, MsgHdrs | undefined], Msg>>();
  private readonly subscriptions: Subscription[] = [];
  /** Commit notices of requests in flight, by notice subject (see RequestOptions.commitWaitMs). */
  private readonly noticesAwaited = new Map<string, () => void>();
  private noticePrefix: string | undefined;
  private noticeCount = 0;
  /** Sends replies, in parts when one is larger than a bus message may be (reply-parts.ts). */
  private readonly replies: ReplySender;

  private constructor(
    readonly connection: NatsConnection,
    private readonly options: BusOptions,
  ) {
    this.replies = new ReplySender(connection, options.logger);
  }

  static async connect(options: BusOptions): Promise<Bus> {
    const connection = await connect({
      servers: options.servers,
      name: options.service,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
      // nats.js would build an Error (a stack trace) and a timeout error for every request up
      // front, for a richer stack on failure: a measurable share of a command's CPU. Failures
      // are logged with their subject and request id instead.
      noAsyncTraces: true,
    });
    const bus = new Bus(connection, options);
    void bus.watchStatus();
    return bus;
  }

  get isConnected(): boolean {
    return !this.connection.isClosed() && !this.connection.isDraining();
  }

  private async watchStatus(): Promise<void> {
    for await (const status of this.connection.status()) {
      this.options.logger.info({ nats: status.type }, 'bus connection status');
    }
  }

  /** The subject as it goes on the wire (after the test prefix, if any). */
  private wire(subject: string): string {
    return `${this.options.subjectPrefix ?? ''}${subject}`;
  }

  /** Serves every subject of a service's handler map (see ServiceHandlers). */
  serveAll<S extends RequestSubject>(handlers: ServiceHandlers<S>): void {
    for (const subject of Object.keys(handlers) as S[]) this.serve(subject, handlers[subject] as unknown as RequestHandler<S>);
  }

  /** Serves a request subject; every replica of the service joins the same queue group. */
  serve<S extends RequestSubject>(subject: S, handler: RequestHandler<S>): void {
    const { logger, service } = this.options;
    const sub = this.connection.subscribe(this.wire(subject), {
      queue: service,
      callback: (err, msg) => {
        if (err) {
          logger.error({ err, subject }, 'subscription failed');
          return;
        }
        const started = performance.now();
        // The caller's trace goes on (a request from outside any trace starts one): every log
        // line of the handler, and every request and event it makes, carries it.
        const hop = telemetryOn ? startHop(subject, 'server', parseTraceparent(msg.headers?.get(TRACEPARENT_HEADER))) : UNTRACED;
        void withWork({ trace: hop.context }, () => this.handle(subject, handler as unknown as RequestHandler, msg.data)).then((outgoing) => {
          const { envelope } = this.respond(subject, msg, outgoing);
          const outcome = envelope.ok ? 'ok' : envelope.error.code;
          busMetrics.handled.record(`${subject} ${outcome}`, { subject, outcome }, { subject }, (performance.now() - started) / 1000);
          if (hop.recording) hop.end(envelope.ok ? undefined : { error: outcome });
        });
      },
    });
    this.subscriptions.push(sub);
  }

  /**
   * Sends a handler's reply, in parts when it is larger than one bus message may be. A reply the
   * bus still refuses (the connection closing) would otherwise throw out of the subscription
   * callback and end the process: it is logged and answered with a short internal error if that
   * can be sent, so the caller gets an answer rather than waiting out its timeout. Returns what
   * was sent.
   */
  private respond(subject: RequestSubject, msg: Msg, { envelope, json }: Outgoing): Outgoing {
    try {
      if (!json || !envelope.ok) this.replies.respond(msg, codec.encode(envelope));
      else {
        const { data, headers } = encodeWithJsonBody(envelope, json, wantsSplitReply(msg.headers));
        this.replies.respond(msg, data, headers);
      }
      return { envelope, ...(json ? { json } : {}) };
    } catch (err) {
      this.options.logger.error({ err, subject }, 'reply could not be sent');
      const failed: ReplyEnvelope = { ok: false, error: toEnvelopeError(new InternalError()) };
      try {
        msg.respond(codec.encode(failed));
      } catch (again) {
        this.options.logger.error({ err: again, subject }, 'error reply could not be sent either');
      }
      return { envelope: failed };
    }
  }

  private async handle(subject: RequestSubject, handler: RequestHandler, data: Uint8Array): Promise<Outgoing> {
    const arrived = Date.now();
    const log = this.options.logger.child({ subject });
    try {
      const envelope = checkRequestEnvelope(codec.decode(data)) as RequestOf<RequestSubject>;
      // From here every log line of this request carries its request_id (logger.ts).
      const work = currentWork();
      if (work) work.requestId = envelope.request_id;
      checkBody(subject, envelope.body);
      // A sender that set no deadline (a hand-made envelope) gets this service's own timeout.
      envelope.deadline ??= arrived + this.options.requestTimeoutMs;
      const deadline = envelope.deadline;
      if (arrived >= deadline) {
        log.warn({ late_ms: arrived - deadline }, 'request arrived after its deadline; not run');
        throw arrivedTooLate();
      }
      const notice = envelope.commit_notice;
      const beforeCommit = async (): Promise<void> => {
        if (notice === undefined || this.connection.isClosed()) return;
        this.connection.publish(notice);
        // The bus server has the notice before the COMMIT is sent: a caller never misses the notice of work that committed.
        await this.connection.flush();
      };
      const result = await handler(envelope, { logger: log, deadline, remainingMs: () => Math.max(0, deadline - Date.now()), beforeCommit });
      const reply = replyOf(subject, result);
      // One line per request handled, at debug: with the request's request_id and trace_id.
      log.debug({ status: reply.envelope.ok ? reply.envelope.status : undefined, ms: Date.now() - arrived }, 'handled');
      return reply;
    } catch (err) {
      if (isDeadlineExceeded(err)) log.warn({ err }, 'deadline passed before the work was stored');
      else if (isStoreOutage(err)) log.warn({ err }, 'database unavailable');
      else if (!(err instanceof ApiError)) log.error({ err }, 'handler failed');
      // A deadline that passed before the work was stored (packages/db's commit guard) is a 503.
      return { envelope: { ok: false, error: toEnvelopeError(isDeadlineExceeded(err) && !(err instanceof ApiError) ? new DeadlineExceededError() : err) } };
    }
  }

  /**
   * Sends a request envelope with its deadline and returns the validated reply. The deadline is
   * the earliest of now + timeoutMs, options.deadline and a deadline the envelope already has;
   * the reply is awaited until the deadline plus options.outcomeGraceMs (longer once a commit
   * notice came, see options.commitWaitMs). A missing responder,
   * no reply by then, an open breaker, a deadline already passed or a malformed reply all
   * surface as ServiceUnavailableError.
   */
  async request<S extends RequestSubject>(subject: S, envelope: RequestOf<S>, options: RequestOptions = {}): Promise<ReplyOf<S>> {
    return (await this.exchange(subject, envelope, options, false)) as ReplyOf<S>;
  }

  /**
   * As request(), for a caller that relays the reply to HTTP as it is (the gateway): a body its
   * replier wrote as JSON text (a JsonBody) comes back as that JsonBody, its bytes unparsed and
   * not checked again against the subject's reply schema (the replier checked it).
   */
  async relay<S extends RequestSubject>(subject: S, envelope: RequestOf<S>, options: RequestOptions = {}): Promise<RelayedReplyOf<S>> {
    return this.exchange(subject, envelope, options, true);
  }

  private async exchange<S extends RequestSubject>(subject: S, envelope: RequestOf<S>, options: RequestOptions, keepJsonBody: boolean): Promise<RelayedReplyOf<S>> {
    const started = performance.now();
    const work = currentWork();
    const hop = work ? startHop(subject, 'client', work.trace) : undefined;
    let outcome = 'unavailable';
    try {
      const reply = await this.send(subject, envelope, options, requestHeaders(hop, keepJsonBody), keepJsonBody);
      outcome = reply.ok ? 'ok' : reply.error.code;
      return reply;
    } finally {
      busMetrics.requested.record(`${subject} ${outcome}`, { subject, outcome }, { subject }, (performance.now() - started) / 1000);
      if (hop?.recording) hop.end(outcome === 'ok' ? undefined : { error: outcome });
    }
  }

  private async send<S extends RequestSubject>(subject: S, envelope: RequestOf<S>, options: RequestOptions, headers: MsgHdrs | undefined, keepJsonBody: boolean): Promise<RelayedReplyOf<S>> {
    const now = Date.now();
    const deadline = Math.floor(
      Math.min(now + (options.timeoutMs ?? this.options.requestTimeoutMs), options.deadline ?? Infinity, envelope.deadline ?? Infinity),
    );
    if (deadline <= now) {
      this.options.logger.warn({ subject, request_id: envelope.request_id, late_ms: now - deadline }, 'bus request not sent: its deadline has passed');
      throw new ServiceUnavailableError();
    }
    const graceMs = Math.max(0, options.outcomeGraceMs ?? 0);
    const commitWaitMs = Math.max(0, options.commitWaitMs ?? 0);
    const notice = commitWaitMs > graceMs ? this.awaitNotice() : undefined;
    // A body its subject's schema refuses is the caller's bug: it fails here, before anything is sent.
    checkRequestBody(subject, envelope.body);
    const sent = checkRequestEnvelope({ ...envelope, deadline, ...(notice ? { commit_notice: notice.subject } : {}) });
    let first: Msg;
    try {
      const reply = this.breakerFor(subject).fire(this.wire(subject), codec.encode(sent), deadline - now + (notice ? commitWaitMs : graceMs), headers);
      first = notice ? await replyUnlessUncommitted(reply, deadline + graceMs - Date.now(), notice.received) : await reply;
    } catch (err) {
      this.options.logger.warn({ subject, err: describeBusError(err), request_id: envelope.request_id }, 'bus request failed');
      throw notDelivered(err) ? new NotDeliveredError() : new ServiceUnavailableError();
    } finally {
      if (notice) this.noticesAwaited.delete(notice.subject);
    }
    let raw: { data: Uint8Array; headers?: MsgHdrs };
    try {
      // The rest of a reply sent in parts gets the time the first part had. The handler has run
      // by now: a part that does not come is an outage, never a request that was not delivered.
      raw = await wholeReply(this.connection, first, deadline + Math.max(graceMs, notice ? commitWaitMs : 0));
    } catch (err) {
      this.options.logger.warn({ subject, err: describeBusError(err), request_id: envelope.request_id }, 'bus reply incomplete');
      throw new ServiceUnavailableError();
    }
    try {
      const head = splitReplyHead(raw.headers);
      if (head !== undefined) {
        const reply = checkReplyEnvelope(head);
        if (!reply.ok || reply.body !== undefined) throw new Error('a split reply is a success whose body is the data');
        const body = JsonBody.ofBytes(raw.data);
        return { ...reply, body: keepJsonBody ? body : checkReplyBody(subject, body.parse()) } as RelayedReplyOf<S>;
      }
      const reply = checkReplyEnvelope(codec.decode(raw.data));
      if (reply.ok && reply.body !== undefined) checkReplyBody(subject, reply.body);
      return reply as RelayedReplyOf<S>;
    } catch (err) {
      this.options.logger.error({ subject, err, request_id: envelope.request_id }, 'malformed reply');
      throw new ServiceUnavailableError();
    }
  }

  /** A fresh commit-notice subject for one request and whether its notice has come. */
  private awaitNotice(): { subject: string; received: () => boolean } {
    if (!this.noticePrefix) {
      const prefix = createInbox();
      this.subscriptions.push(this.connection.subscribe(`${prefix}.*`, { callback: (_err, msg) => this.noticesAwaited.get(msg.subject)?.() }));
      this.noticePrefix = prefix;
    }
    this.noticeCount += 1;
    const subject = `${this.noticePrefix}.${this.noticeCount}`;
    let received = false;
    this.noticesAwaited.set(subject, () => {
      received = true;
    });
    return { subject, received: () => received };
  }

  private breakerFor(subject: string): CircuitBreaker<[string, Uint8Array, number, MsgHdrs | undefined], Msg> {
    let breaker = this.breakers.get(subject);
    if (!breaker) {
      breaker = new CircuitBreaker(
        (s: string, payload: Uint8Array, timeout: number, headers: MsgHdrs | undefined) => this.connection.request(s, payload, headers ? { timeout, headers } : { timeout }),
        {
          // The request carries its own timeout; the breaker only counts failures.
          timeout: false,
          errorThresholdPercentage: 50,
          volumeThreshold: 10,
          rollingCountTimeout: 10_000,
          resetTimeout: 2_000,
        },
      );
      const label = { subject };
      busMetrics.circuit.set(label, 0);
      breaker.on('open', () => {
        busMetrics.circuit.set(label, 1);
        this.options.logger.warn({ subject }, 'circuit opened');
      });
      breaker.on('halfOpen', () => busMetrics.circuit.set(label, 0.5));
      breaker.on('close', () => {
        busMetrics.circuit.set(label, 0);
        this.options.logger.info({ subject }, 'circuit closed');
      });
      this.breakers.set(subject, breaker);
    }
    return breaker;
  }

  /** Publishes an event after checking it against its schema. */
  publish<S extends EventSubject>(subject: S, payload: EventOf<S>): void {
    checkEvent(subject, payload);
    const work = currentWork();
    if (!work) return this.connection.publish(this.wire(subject), codec.encode(payload));
    const h = natsHeaders();
    h.set(TRACEPARENT_HEADER, formatTraceparent(work.trace));
    this.connection.publish(this.wire(subject), codec.encode(payload), { headers: h });
  }

  /** Subscribes to an event subject; every replica receives every event (no queue group). */
  subscribe<S extends EventSubject>(subject: S, onEvent: (payload: EventOf<S>) => void): void {
    const sub = this.connection.subscribe(this.wire(subject), {
      callback: (err, msg) => {
        if (err) return;
        try {
          onEvent(checkEvent<EventOf<S>>(subject, codec.decode(msg.data)));
        } catch (e) {
          this.options.logger.warn({ subject, err: e }, 'dropped malformed event');
        }
      },
    });
    this.subscriptions.push(sub);
  }

  /** Stops taking requests, lets in-flight handlers finish, then closes. */
  async drain(): Promise<void> {
    for (const breaker of this.breakers.values()) breaker.shutdown();
    if (!this.connection.isClosed()) await this.connection.drain();
    this.replies.close();
  }
}

/**
 * Checks a request's body against its subject's schema: a body the schema refuses is a 400
 * naming what is wrong, before the handler runs.
 */
function checkBody(subject: RequestSubject, body: unknown): void {
  try {
    checkRequestBody(subject, body);
  } catch (err) {
    if (err instanceof ContractViolation) throw new ValidationError(`Invalid body: ${err.details}`);
    throw err;
  }
}

/**
 * The reply of a handler's result. A body its subject's reply schema refuses is this service's
 * bug: it is thrown (logged, answered 500) rather than sent to a caller that trusts it. A
 * JsonBody is parsed for that check only where the subject has a reply schema.
 */
function replyOf(subject: RequestSubject, result: HandlerResult): Outgoing {
  const reply: ReplySuccess = { ok: true, status: result.status ?? 200 };
  if (result.headers) reply.headers = result.headers;
  if (result.unspent) reply.unspent = true;
  if (result.body instanceof JsonBody) {
    if (hasReplySchema(subject)) checkReplyBody(subject, result.body.parse());
    return { envelope: checkReplyEnvelope(reply), json: result.body };
  }
  if (result.body !== undefined) reply.body = checkReplyBody(subject, result.body);
  return { envelope: checkReplyEnvelope(reply) };
}

/**
 * The reply, unless no commit notice has come by the end of the grace (graceEndsInMs from now):
 * then nothing can have been committed and the wait ends with a timeout.
 */
function replyUnlessUncommitted(reply: Promise<Msg>, graceEndsInMs: number, noticed: () => boolean): Promise<Msg> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => {
        if (!noticed()) reject(Object.assign(new Error('no reply and no commit notice by the deadline'), { code: ErrorCode.Timeout }));
      },
      Math.max(0, graceEndsInMs),
    );
    reply.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}

/** True when no replier received the request: no responders, or the breaker kept it from being sent. */
function notDelivered(err: unknown): boolean {
  return (err as NatsError | undefined)?.code === ErrorCode.NoResponders || (err as { code?: string } | undefined)?.code === 'EOPENBREAKER';
}

function describeBusError(err: unknown): string {
  const code = (err as NatsError | undefined)?.code;
  if (code === ErrorCode.NoResponders) return 'no responders';
  if (code === ErrorCode.Timeout) return 'timeout';
  if ((err as { code?: string } | undefined)?.code === 'EOPENBREAKER') return 'circuit open';
  return err instanceof Error ? err.message : String(err);
}
