import { parseTimeParam, TIME_MAX_MS, TIME_MIN_MS, ValidationError } from '@fleet/service-kit';

/**
 * Query parameters of the meter read routes: times, cursors and the interval modes. Pure.
 * start, end and received_since follow the API's one rule for date/time query parameters
 * (parseTimeParam of the kit, as system-files' `since` does), so no route reads a time another refuses.
 */

/** Widest start/end window of GET .../intervals (by start time): 366 days. */
export const INTERVALS_RANGE_CAP_MS = 366 * 86_400_000;
/** The latest end of a summary window: one calendar year (UTC) after its start, as the spec's "a year" (Feb 29 + 1 year is Mar 1). */
function oneYearAfter(start: Date): number {
  const end = new Date(start.getTime());
  end.setUTCFullYear(end.getUTCFullYear() + 1);
  return end.getTime();
}
export const DEFAULT_WINDOW_MS = 86_400_000;
export const DEFAULT_LIMIT = 200;
export const MAX_LIMIT = 1000;

export interface Window {
  start: Date;
  end: Date;
}

/** start/end with the defaults (end now, start 24 hours before end) and the checks. */
export function resolveWindow(query: { start?: unknown; end?: unknown }, now: Date, cap: number | 'one year', what = 'range'): Window {
  const end = query.end !== undefined ? parseTimeParam(query.end, 'end') : now;
  const start = query.start !== undefined ? parseTimeParam(query.start, 'start') : new Date(end.getTime() - DEFAULT_WINDOW_MS);
  if (start.getTime() >= end.getTime()) throw new ValidationError("invalid 'start': must be before 'end'");
  const latestEnd = cap === 'one year' ? oneYearAfter(start) : start.getTime() + cap;
  if (end.getTime() > latestEnd) {
    const most = cap === 'one year' ? 'one year' : `${Math.round(cap / 86_400_000)} days`;
    throw new ValidationError(`invalid ${what}: at most ${most} between 'start' and 'end'`);
  }
  return { start, end };
}

export function parseLimit(value: unknown): number {
  if (value === undefined) return DEFAULT_LIMIT;
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIMIT) throw new ValidationError(`invalid 'limit': a whole number from 1 to ${MAX_LIMIT}`);
  return n;
}

export function parseBool(value: unknown, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === true || value === 'true' || value === '1') return true;
  if (value === false || value === 'false' || value === '0') return false;
  throw new ValidationError(`invalid '${name}': expected true or false`);
}

// ---------------------------------------------------------------------------------------
// Cursors: base64url of a small JSON document. They are opaque to partners; the service
// checks every field, the device and (for bookmarks) the database epoch.

/** Key of the last record of a page by start time: (start ms or null, sid, seq). */
export type StartKey = [number | null, string, number];

export interface StartCursor {
  m: 's';
  d: string;
  /** window start/end (ms) and unknown_time of the first request */
  s: number;
  e: number;
  u: boolean;
  k: StartKey;
}

export interface ArrivalCursor {
  m: 'r';
  d: string;
  /** database epoch */
  ep: string;
  /** arrival sequence of the last record seen (the bookmark) */
  a: number;
}

export type Cursor = StartCursor | ArrivalCursor;

export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor), 'utf8').toString('base64url');
}

/** A sid as stored: 8 hex characters, or '#' and a hash for a record that carried none usable. */
const STORED_SID = /^#?[0-9a-f]{0,40}$/;
const badCursor = (): ValidationError => new ValidationError("invalid 'cursor'");
const isInt = (x: unknown): x is number => Number.isSafeInteger(x);

/** Decodes a cursor issued for this device; anything else is 400 invalid 'cursor'. */
export function decodeCursor(text: unknown, deviceId: string): Cursor {
  if (typeof text !== 'string' || text.length === 0 || text.length > 512 || !/^[A-Za-z0-9_-]+$/.test(text)) throw badCursor();
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    throw badCursor();
  }
  if (doc === null || typeof doc !== 'object') throw badCursor();
  const c = doc as Record<string, unknown>;
  if (c.d !== deviceId) throw badCursor();
  if (c.m === 's') {
    const k = c.k;
    const keyOk =
      Array.isArray(k) && k.length === 3 && (k[0] === null || isInt(k[0])) && typeof k[1] === 'string' && STORED_SID.test(k[1]) && isInt(k[2]);
    if (!isInt(c.s) || !isInt(c.e) || typeof c.u !== 'boolean' || !keyOk || c.s >= c.e) throw badCursor();
    // The window was one this service resolved (a default start may lie a day before the range), and the key lies inside it.
    if (c.s < TIME_MIN_MS - DEFAULT_WINDOW_MS || c.e > TIME_MAX_MS) throw badCursor();
    const keyStart = (k as StartKey)[0];
    if (keyStart !== null && (keyStart < c.s || keyStart >= c.e)) throw badCursor();
    return { m: 's', d: deviceId, s: c.s, e: c.e, u: c.u, k: k as StartKey };
  }
  if (c.m === 'r') {
    if (typeof c.ep !== 'string' || !isInt(c.a) || c.a < 0) throw badCursor();
    return { m: 'r', d: deviceId, ep: c.ep, a: c.a };
  }
  throw badCursor();
}

// ---------------------------------------------------------------------------------------

export type IntervalsPlan =
  | { mode: 'start'; window: Window; unknownTime: boolean; after: StartKey | null; limit: number }
  | { mode: 'received'; receivedSince: Date | null; afterArrival: number | null; epoch: string | null; limit: number };

/**
 * Reads the intervals query into one of the two modes with every rule of the spec: defaults,
 * a cursor that carries its window (start, end, unknown_time beside it must equal it), mixed
 * modes refused, the range cap.
 */
export function planIntervals(query: Record<string, unknown>, deviceId: string, now: Date): IntervalsPlan {
  const limit = parseLimit(query.limit);
  const unknownTime = parseBool(query.unknown_time, 'unknown_time');
  const has = (k: string) => query[k] !== undefined;
  const cursor = has('cursor') ? decodeCursor(query.cursor, deviceId) : undefined;

  if (cursor?.m === 'r' || (!cursor && has('received_since'))) {
    if (has('start') || has('end') || unknownTime !== undefined) {
      throw new ValidationError("invalid query: 'received_since' or an arrival cursor cannot be combined with 'start', 'end' or 'unknown_time'");
    }
    if (cursor?.m === 'r') return { mode: 'received', receivedSince: null, afterArrival: cursor.a, epoch: cursor.ep, limit };
    return { mode: 'received', receivedSince: parseTimeParam(query.received_since, 'received_since'), afterArrival: null, epoch: null, limit };
  }
  if (has('received_since')) {
    throw new ValidationError("invalid query: 'received_since' cannot be combined with a cursor by start time");
  }
  if (cursor?.m === 's') {
    if (has('start') && parseTimeParam(query.start, 'start').getTime() !== cursor.s) throw new ValidationError("invalid 'start': it must equal the first request's when a cursor is sent");
    if (has('end') && parseTimeParam(query.end, 'end').getTime() !== cursor.e) throw new ValidationError("invalid 'end': it must equal the first request's when a cursor is sent");
    if (unknownTime !== undefined && unknownTime !== cursor.u) throw new ValidationError("invalid 'unknown_time': it must equal the first request's when a cursor is sent");
    return { mode: 'start', window: { start: new Date(cursor.s), end: new Date(cursor.e) }, unknownTime: cursor.u, after: cursor.k, limit };
  }
  const window = resolveWindow(query, now, INTERVALS_RANGE_CAP_MS);
  return { mode: 'start', window, unknownTime: unknownTime ?? false, after: null, limit };
}
