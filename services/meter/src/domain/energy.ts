import { DateTime, IANAZone } from 'luxon';
import { ValidationError } from '@fleet/service-kit';
import { round6 } from './record';
import { isoByteWriter, isoOffset } from './iso-time';
import { offsetsOf, type ZoneOffsets } from './zone-offsets';

/**
 * Energy buckets: whole local hours or days of an IANA zone (UTC when none is given). A day
 * at a daylight-saving change is 23 or 25 hours; an hour is always 3600 s. The buckets cover
 * the window from the bucket holding `start` to the one holding the last instant before
 * `end`; a record counts in the bucket holding its start, and only records that start inside
 * the window count (so the total equals the summary's energy for the same window).
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
  let cursor = DateTime.fromMillis(start.getTime(), { zone: tz }).startOf(width).toMillis();
  if (!Number.isFinite(cursor) || !Number.isFinite(endMs)) throw new ValidationError("invalid 'start': outside the supported dates");
  const offsets = zone === undefined ? UTC_OFFSETS : offsetsOf(zone);
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
  // An hour is 3600 s of real time; realign to the local hour where the zone's offset moves by
  // a fraction of an hour.
  const next = at + HOUR_MS;
  const local = next + offsets.at(next) * 60_000;
  const misaligned = ((local % HOUR_MS) + HOUR_MS) % HOUR_MS;
  return misaligned === 0 || next - misaligned <= at ? next : next - misaligned;
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
