import type { ParsedRecord } from './record';

/** What a clear remembers of the device's records, in the meter's own terms. */
export interface ClearMark {
  /** Wall-clock time of the clear. */
  clearedAt: Date;
  /** Highest seq seen per stream (sid) when the clear was made. */
  streams: Record<string, number>;
  /**
   * Newest start (meter clock, or derived) of the records the platform accepted when the clear
   * was made. Quarantined records are left out: their start is not trusted (one far in the
   * future would otherwise hold back every later record until the meter's clock passed it).
   */
  maxStartAt: Date | null;
}

/**
 * Whether a record arriving after a clear was recorded before it, so it is not stored:
 * - its stream was seen and its seq is at or below the highest seq seen of that stream (a late
 *   or repeated record);
 * - else it has a start before the newest accepted start seen (compared on the meter's clock, so
 *   a meter whose clock runs behind or ahead of ours is judged by its own time);
 * - else, with neither a known stream nor a start, it arrived before the clear.
 * Records of a new stream, or later than everything seen, are kept.
 */
export function fromBeforeClear(record: Pick<ParsedRecord, 'sid' | 'seq' | 'startAt' | 'receivedAt'>, mark: ClearMark): boolean {
  const maxSeq = Object.prototype.hasOwnProperty.call(mark.streams, record.sid) ? mark.streams[record.sid] : undefined;
  if (maxSeq !== undefined && record.seq <= maxSeq) return true;
  if (record.startAt && mark.maxStartAt) return record.startAt.getTime() < mark.maxStartAt.getTime();
  if (maxSeq === undefined && !record.startAt) return record.receivedAt.getTime() < mark.clearedAt.getTime();
  return false;
}
