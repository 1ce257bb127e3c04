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
  /**
   * What the meter's clock read at the clear, estimated from the newest accepted record with a
   * start and a duration: the clear's time plus how far that record's end (start + duration, when
   * the meter sends it) was from its arrival. A record that arrived late makes the estimate early,
   * so it errs toward keeping records. Null when no such record was stored, and for clears made
   * before it was kept.
   */
  meterClockAtClear?: Date | null;
}

/**
 * Whether a record arriving after a clear was recorded before it, so it is not stored:
 * - its stream was seen and its seq is at or below the highest seq seen of that stream (a late
 *   or repeated record);
 * - else it has a start before the newest accepted start seen, or it ended (start + duration)
 *   before the meter's clock read the clear's time: a record the meter made before the clear
 *   and sent after it (it was offline meanwhile). Both are compared on the meter's clock, so a
 *   meter whose clock runs behind or ahead of ours is judged by its own time; a record still
 *   running at the clear is kept;
 * - else, with neither a known stream nor a start, it arrived before the clear.
 * Records of a new stream, or later than everything seen, are kept.
 */
export function fromBeforeClear(record: Pick<ParsedRecord, 'sid' | 'seq' | 'startAt' | 'durationS' | 'receivedAt'>, mark: ClearMark): boolean {
  const maxSeq = Object.prototype.hasOwnProperty.call(mark.streams, record.sid) ? mark.streams[record.sid] : undefined;
  if (maxSeq !== undefined && record.seq <= maxSeq) return true;
  if (record.startAt) {
    const start = record.startAt.getTime();
    if (mark.maxStartAt && start < mark.maxStartAt.getTime()) return true;
    const clock = mark.meterClockAtClear;
    return clock != null && record.durationS !== null && start + record.durationS * 1000 <= clock.getTime();
  }
  if (maxSeq === undefined) return record.receivedAt.getTime() < mark.clearedAt.getTime();
  return false;
}
