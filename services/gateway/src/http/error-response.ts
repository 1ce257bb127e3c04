import type { Response } from 'express';
import { ApiError, InternalError } from '@fleet/service-kit';

export const AUTH_REALM = 'partner-device-api';

/** Writes the spec's error body and the headers that go with the error. */
export function sendError(res: Response, err: unknown): void {
  const api = err instanceof ApiError ? err : new InternalError();
  const requestId = String(res.locals.requestId ?? '');
  const body: Record<string, unknown> = { ...(api.options.extra ?? {}), error: api.message, code: api.code, request_id: requestId };
  if (api.options.requiredPermission) body.required_permission = api.options.requiredPermission;
  if (api.options.retryAfter !== undefined) res.setHeader('Retry-After', String(api.options.retryAfter));
  if (api.status === 401) {
    const presented = res.locals.keyPresented === true;
    res.setHeader('WWW-Authenticate', `Bearer realm="${AUTH_REALM}"${presented ? ', error="invalid_token"' : ''}`);
  }
  res.status(api.status).json(body);
}
