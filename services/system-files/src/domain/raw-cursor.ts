/**
 * The cursor of a raw MQTT read: the DEVICE_IN stream position the next page starts after,
 * bound to the topic filter it was issued for (a cursor follows one filter; another filter would
 * silently start at the wrong place). Opaque and URL-safe (base64url). Pure.
 */
import { createHash } from 'node:crypto';
import { ValidationError } from '@fleet/service-kit';

/** A short tag of the filter: a cursor must come back with the same filter, not hide it. */
const filterTag = (filter: string): string => createHash('sha256').update(filter, 'utf8').digest().subarray(0, 12).toString('base64url');

export function encodeRawCursor(seq: number, filter: string): string {
  return Buffer.from(`m1:${seq}:${filterTag(filter)}`, 'utf8').toString('base64url');
}

/** The stream position a cursor stands at; 400 for a cursor of another filter or not a raw read cursor. */
export function decodeRawCursor(cursor: string, filter: string): number {
  const m = /^m1:(0|[1-9][0-9]{0,15}):([A-Za-z0-9_-]{16})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m || !Number.isSafeInteger(Number(m[1]))) throw new ValidationError("invalid 'cursor': pass back a next_cursor of this read");
  if (m[2] !== filterTag(filter)) throw new ValidationError("'cursor' was issued for another topic filter: read with the filter it came from, or start without a cursor");
  return Number(m[1]);
}
