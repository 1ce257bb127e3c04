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

export class InternalError extends ApiError {
  constructor() {
    super(500, 'internal_error', 'Internal error.');
  }
}

/** The envelope form of any thrown value; anything not an ApiError is an internal error. */
export function toEnvelopeError(err: unknown): EnvelopeError {
  const api = err instanceof ApiError ? err : new InternalError();
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
