/** Reading what the gateway resolved and sent: the partner, the device, path ids and the body. */
import type { Principal, RequestEnvelope } from '@fleet/contracts';
import { ForbiddenError, NotFoundError, ValidationError } from '@fleet/service-kit';
import { DocumentError } from '../domain/documents';

export function principalOf(req: RequestEnvelope): Principal {
  if (!req.principal) throw new ForbiddenError('This request needs a partner.');
  return req.principal;
}

/** The device the gateway resolved within the partner's scope (out of scope never gets here). */
export function deviceOf(req: RequestEnvelope): { deviceId: string; product: string | null } {
  if (!req.device) throw new NotFoundError('Device not found.');
  return { deviceId: req.device.device_id, product: req.device.product };
}

/** Sensors relay through lights, and only lights show a signal. */
export function lightOf(req: RequestEnvelope): string {
  const { deviceId, product } = deviceOf(req);
  if (product !== 'light') throw new ValidationError('Sensors and alert signals apply to light devices only.');
  return deviceId;
}

/** A row id from the path: a positive integer, else the row cannot exist (404). */
export function idParam(req: RequestEnvelope, name: string): number {
  const raw = req.params[name] ?? '';
  if (!/^[1-9]\d{0,9}$/.test(raw) || Number(raw) > 2_147_483_647) throw new NotFoundError('Not found.');
  return Number(raw);
}

export function bodyOf(req: RequestEnvelope): Record<string, unknown> {
  const body = req.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new ValidationError('The body must be a JSON object.');
  return body as Record<string, unknown>;
}

/** The body's fields must all be known ones. */
export function onlyFields(body: Record<string, unknown>, allowed: readonly string[]): void {
  const extra = Object.keys(body).find((k) => !allowed.includes(k));
  if (extra !== undefined) throw new ValidationError(`'${extra}' is not a field here (allowed: ${allowed.join(', ')})`);
}

/** Runs a document check; its refusal is a 400 naming the field. */
export function checked<T>(work: () => T): T {
  try {
    return work();
  } catch (err) {
    if (err instanceof DocumentError) throw new ValidationError(err.message);
    throw err;
  }
}

/** An optional integer-or-null id field of a body. Any integer is an id: one that names no row is the caller's 404. */
export function nullableId(value: unknown, field: string): number | null {
  if (value === null) return null;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new ValidationError(`'${field}' must be an integer id or null`);
  return value;
}
