import type { EnvelopeError, Permission } from '@fleet/contracts';

export interface ApiErrorOptions {
  requiredPermission?: Permission;
  /** Seconds; becomes the Retry-After header. */
  retryAfter?: number;
  /** Fields added to the partner's error body. */
  extra?: Record<string, unknown>;
}

/**
 * A refusal or failure with the HTTP status and stable code the partner sees.
 * Services throw these; the bus runtime carries them in the reply envelope and the
 * gateway maps them to HTTP in one place.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly options: ApiErrorOptions = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class ValidationError extends ApiError {
  constructor(message: string) {
    super(400, 'validation_error', message);
  }
}

export class UnauthorizedError extends ApiError {
  constructor() {
    super(401, 'unauthorized', 'A valid API key is required.');
  }
}

export class ForbiddenError extends ApiError {
  constructor(message: string, code = 'forbidden', requiredPermission?: Permission) {
    super(403, code, message, requiredPermission ? { requiredPermission } : {});
  }
}

export class NotFoundError extends ApiError {
  constructor(message = 'Not found.') {
    super(404, 'not_found', message);
  }
}

export class ConflictError extends ApiError {
  constructor(message: string, code = 'conflict', extra?: Record<string, unknown>) {
    super(409, code, message, extra ? { extra } : {});
  }
}

export class RateLimitedError extends ApiError {
  constructor(message: string, retryAfter: number) {
    super(429, 'rate_limited', message, { retryAfter });
  }
}

export class ServiceUnavailableError extends ApiError {
  constructor(message = 'The service is temporarily unavailable; retry shortly.', code = 'service_unavailable', retryAfter = 1) {
    super(503, code, message, { retryAfter });
  }
}

/**
 * A bus request no replier received: no service listened on its subject, or its circuit
 * breaker was open so it was never sent. Nothing was done, so the caller may try another way.
 */
export class NotDeliveredError extends ServiceUnavailableError {}

/**
 * The request's deadline passed before its work was stored: the transaction was rolled back,
 * so nothing was stored and a retry is safe.
 */
export class DeadlineExceededError extends ServiceUnavailableError {
  constructor(message = 'The request ran out of time before its work was stored; nothing was stored. Retry shortly.') {
    super(message);
  }
}

/**
 * The code by which errors of packages that do not know HTTP (packages/db's CommitDeadlineError)
 * say "the deadline passed before the work was stored"; the bus answers them as DeadlineExceededError.
 */
export const DEADLINE_EXCEEDED_CODE = 'deadline_exceeded';

/** A DeadlineExceededError, or any error that carries the code DEADLINE_EXCEEDED_CODE. */
export function isDeadlineExceeded(err: unknown): boolean {
  return err instanceof DeadlineExceededError || (err instanceof Error && (err as { code?: unknown }).code === DEADLINE_EXCEEDED_CODE);
}

export class InternalError extends ApiError {
  constructor() {
    super(500, 'internal_error', 'Internal error.');
  }
}

/**
 * True when the database refused a value of the request itself: SQLSTATE class 22 (data exception:
 * U+0000 in text, a time or number out of range, text it cannot read), found on the error or
 * its causes (node-postgres errors, Prisma's driver-adapter errors).
 */
export function isDataException(err: unknown): boolean {
  const seen = new Set<unknown>();
  const queue: unknown[] = [err];
  while (queue.length && seen.size < 8) {
    const current = queue.shift();
    if (current === null || typeof current !== 'object' || seen.has(current)) continue;
    seen.add(current);
    const e = current as { code?: unknown; originalCode?: unknown; meta?: { driverAdapterError?: unknown }; cause?: unknown };
    for (const code of [e.code, e.originalCode]) if (typeof code === 'string' && /^22[0-9A-Z]{3}$/.test(code)) return true;
    queue.push(e.meta?.driverAdapterError, e.cause);
  }
  return false;
}

/** Fields a driver, driver-adapter or Prisma error may carry. */
interface DriverErrorLike {
  code?: unknown;
  name?: unknown;
  message?: unknown;
  cause?: unknown;
  meta?: { driverAdapterError?: { cause?: { kind?: unknown } } };
}

/** Driver adapter error kinds that mean the database cannot be used right now. */
const OUTAGE_KINDS = ['DatabaseNotReachable', 'DatabaseDoesNotExist', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections', 'TransactionStartTimeout'];
/** Prisma, Node socket and Postgres (admin shutdown, cannot connect now, too many connections, no such database) codes of the same. */
const OUTAGE_CODES = ['P1001', 'P1002', 'P1008', 'P1017', 'P2024', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', '57P01', '57P03', '53300', '3D000'];
const OUTAGE_MESSAGE = /ECONNREFUSED|ECONNRESET|Connection terminated|connection timeout|timeout exceeded when trying to connect|too many clients|Can't reach database server/i;

/**
 * True when a service's database is out of reach (refused, dropped, timed out, pool exhausted),
 * found on the error or its causes: a 503 for the partner (retry), not a 500.
 */
export function isStoreOutage(err: unknown): boolean {
  const seen = new Set<unknown>();
  for (let e = err; e && typeof e === 'object' && !seen.has(e) && seen.size < 8; e = (e as DriverErrorLike).cause) {
    seen.add(e);
    const { code, name, message, meta } = e as DriverErrorLike;
    if (typeof code === 'string' && OUTAGE_CODES.includes(code)) return true;
    if (name === 'PrismaClientInitializationError') return true;
    const kind = meta?.driverAdapterError?.cause?.kind;
    if (typeof kind === 'string' && OUTAGE_KINDS.includes(kind)) return true;
    if (typeof message === 'string' && OUTAGE_MESSAGE.test(message)) return true;
  }
  return false;
}

/**
 * The envelope form of any thrown value. A database data exception is the request's fault (400,
 * a safety net behind the gateway's own checks); a database out of reach is a 503; anything else
 * not an ApiError is an internal error.
 */
export function toEnvelopeError(err: unknown): EnvelopeError {
  const api =
    err instanceof ApiError
      ? err
      : isDataException(err)
        ? new ValidationError('A value in the request cannot be stored or compared (control characters, or out of range).')
        : isStoreOutage(err)
          ? new ServiceUnavailableError()
          : new InternalError();
  const out: EnvelopeError = { status: api.status, code: api.code, message: api.message };
  if (api.options.requiredPermission) out.required_permission = api.options.requiredPermission;
  if (api.options.retryAfter !== undefined) out.retry_after = api.options.retryAfter;
  if (api.options.extra) out.extra = api.options.extra;
  return out;
}

export function fromEnvelopeError(e: EnvelopeError): ApiError {
  return new ApiError(e.status, e.code, e.message, {
    ...(e.required_permission ? { requiredPermission: e.required_permission } : {}),
    ...(e.retry_after !== undefined ? { retryAfter: e.retry_after } : {}),
    ...(e.extra ? { extra: e.extra } : {}),
  });
}
