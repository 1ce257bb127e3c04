import { DateTime, IANAZone } from 'luxon';
import { ValidationError } from '@fleet/service-kit';
import { round6 } from './record';
import { isoByteWriter, isoOffset } from './iso-time';
import { offsetsOf, type ZoneOffsets } from './zone-offsets';

/**
 * Energy buckets: whole local hours or days of an IANA zone (UTC when none is given). A day
 * at a daylight-saving change is 23 or 25 hours. An hour bucket is the time the zone's clocks
 * show one local hour with one offset: 3600 s, except where the offset changes by part of an
 * hour (Lord Howe's 30 minutes, Kathmandu's 15 in 1986, Monrovia's 44.5 in 1972) or at a time
 * other than a whole hour (Chatham at :45), which cuts the hour holding the change in two. The
 * buckets cover the window from the bucket holding `start` to the one holding the last instant
 * before `end`; a record counts in the bucket holding its start, and only records that start
 * inside the window count (so the total equals the summary's energy for the same window).
 */

export type BucketWidth = 'hour' | 'day';
/** Fewer than this many buckets per answer. */
export const MAX_BUCKETS = 2000;

export function parseBucket(value: unknown): BucketWidth {
  if (value === undefined) return 'hour';
  if (value === 'hour' || value === 'day') return value;
  throw new ValidationError("invalid 'bucket': 'hour' or 'day'");
}

/** Zone names found valid (a few hundred at most): checking one builds an Intl formatter, slow. */
const validZones = new Set<string>();

export function parseZone(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string' && validZones.has(value)) return value;
  if (typeof value !== 'string' || value === '' || value.length > 64 || !IANAZone.isValidZone(value)) {
    throw new ValidationError("invalid 'tz': an IANA time zone name, e.g. Europe/Berlin");
  }
  validZones.add(value);
  return value;
}

export interface Bucket {
  /** Start instant (ms). */
  start: number;
  /** End instant (ms, exclusive). */
  end: number;
  /** The zone's offset at the start (minutes east of UTC); null for UTC buckets (no zone asked). */
  offsetMin: number | null;
}

/** The buckets covering [start, end); throws 400 when 2000 or more would be needed. */
export function bucketsFor(start: Date, end: Date, width: BucketWidth, zone: string | undefined): Bucket[] {
  const tz = IANAZone.create(zone ?? 'UTC');
  const endMs = end.getTime();
  const buckets: Bucket[] = [];
  const offsets = zone === undefined ? UTC_OFFSETS : offsetsOf(zone);
  const startMs = start.getTime();
  let cursor = !Number.isFinite(startMs) ? Number.NaN : width === 'hour' ? hourHolding(startMs, offsets) : DateTime.fromMillis(startMs, { zone: tz }).startOf('day').toMillis();
  if (!Number.isFinite(cursor) || !Number.isFinite(endMs)) throw new ValidationError("invalid 'start': outside the supported dates");
  while (cursor < endMs) {
    if (buckets.length >= MAX_BUCKETS - 1) {
      throw new ValidationError(`invalid range: more than ${MAX_BUCKETS - 1} ${width} buckets; ${width === 'hour' ? "use bucket 'day' or " : ''}narrow 'start' and 'end'`);
    }
    const next = nextBoundary(cursor, width, offsets, tz);
    if (!(next > cursor)) throw new ValidationError("invalid 'end': outside the supported dates");
    buckets.push({ start: cursor, end: next, offsetMin: zone === undefined ? null : offsets.at(cursor) });
    cursor = next;
  }
  return buckets;
}

const HOUR_MS = 3_600_000;
const UTC_OFFSETS: ZoneOffsets = { at: () => 0 };

function nextBoundary(at: number, width: BucketWidth, offsets: ZoneOffsets, tz: IANAZone): number {
  if (width === 'day') {
    // Local midnight of the next day (23 or 25 hours at DST changes): from the zone's offsets,
    // checked, with luxon's calendar arithmetic where midnight itself is skipped or repeated.
    const local = new Date(at + offsets.at(at) * 60_000);
    const nextDateUtc = Date.UTC(local.getUTCFullYear(), local.getUTCMonth(), local.getUTCDate() + 1);
    let guess = nextDateUtc - offsets.at(nextDateUtc) * 60_000;
    guess = nextDateUtc - offsets.at(guess) * 60_000;
    if (guess > at && guess + offsets.at(guess) * 60_000 === nextDateUtc) return guess;
    return DateTime.fromMillis(at, { zone: tz }).plus({ days: 1 }).startOf('day').toMillis();
  }
  // The next whole local hour in the offset of this bucket, unless the offset changes first:
  // the change ends the bucket, and the next one starts at the local time after the change
  // (Lord Howe's spring: 02:00+10:30 is 02:30+11:00, a bucket of 30 minutes up to 03:00+11:00;
  // its autumn: 02:00+11:00 is 01:30+10:30, the repeated half hour a bucket of its own, as a
  // repeated whole hour is). Each bucket thus has one offset, the one its start_at is written
  // with. No zone changes its offset twice within an hour (nor within a week).
  const offset = offsets.at(at);
  const next = at - localMsIntoHour(at, offset) + HOUR_MS;
  return offsets.at(next - 1) === offset ? next : offsetChangeIn(at, next - 1, offsets);
}

/** Milliseconds since the local whole hour at `ms`, in the given offset (minutes). */
function localMsIntoHour(ms: number, offsetMin: number): number {
  const local = ms + Math.round(offsetMin * 60_000);
  return ((local % HOUR_MS) + HOUR_MS) % HOUR_MS;
}

/** Start of the hour bucket holding `ms`: its local whole hour, or the offset change after it when one lies between. */
function hourHolding(ms: number, offsets: ZoneOffsets): number {
  const offset = offsets.at(ms);
  const wholeHour = ms - localMsIntoHour(ms, offset);
  return offsets.at(wholeHour) === offset ? wholeHour : offsetChangeIn(wholeHour, ms, offsets);
}

/** The first instant in (lo, hi] whose offset differs from lo's (hi's does), to the millisecond. */
function offsetChangeIn(lo: number, hi: number, offsets: ZoneOffsets): number {
  const before = offsets.at(lo);
  let a = lo;
  let b = hi;
  while (b - a > 1) {
    const mid = a + Math.floor((b - a) / 2);
    if (offsets.at(mid) === before) a = mid;
    else b = mid;
  }
  return b;
}

/**
 * A writer of bucket labels into bytes (an answer writes up to 1999): the start in local time
 * with its offset, `Z` for UTC buckets. The local time is the instant shifted by the offset,
 * written as UTC to the second. Returns the index past the label.
 */
export function labelWriter(): (bucket: Bucket, out: Uint8Array, at: number) => number {
  const iso = isoByteWriter(true);
  let offset: number | null | undefined;
  let suffix = Buffer.alloc(0);
  return (bucket, out, at) => {
    if (bucket.offsetMin !== offset) {
      offset = bucket.offsetMin;
      suffix = Buffer.from(offset === null ? 'Z' : isoOffset(offset), 'latin1');
    }
    let o = iso(bucket.start + (offset ?? 0) * 60_000, out, at);
    for (let k = 0; k < suffix.length; k += 1) out[o++] = suffix[k] as number;
    return o;
  };
}

/** Bytes a label takes at most: a six-digit year with its sign, the time, an offset. */
export const LABEL_BYTES = 32;

/** A bucket's label as text (`start_at` of its point). */
export function bucketLabel(bucket: Bucket): string {
  const out = Buffer.alloc(LABEL_BYTES);
  return out.toString('latin1', 0, labelWriter()(bucket, out, 0));
}

export interface EnergyTotal {
  energy_wh: number;
  resets: number;
  intervals: number;
  buckets: number;
}

/** The total over the window: null, not zero, when no record carried a counter reading. */
export function energyTotal(sum: { energyWh: number | null; intervals: number; resets: number }, buckets: number): EnergyTotal | null {
  if (sum.intervals === 0 || sum.energyWh === null) return null;
  return { energy_wh: round6(sum.energyWh), resets: sum.resets, intervals: sum.intervals, buckets };
}
