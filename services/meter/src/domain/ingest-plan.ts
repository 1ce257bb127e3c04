/**
 * What storing a batch of interval records means, without the database: which records are
 * repeats, which come from before a clear, which stored neighbours each stream needs, the
 * flags of every new record against its predecessor, the stored records whose flags change
 * because a late record lands before them, and the row each new record becomes. The store
 * (store/ingest.ts) only reads the neighbours, runs this and writes the result.
 */
import { fromBeforeClear, type ClearMark } from './clears';
import { deriveFields, type DerivedFields, type ParsedRecord, type Predecessor } from './record';

/** A stored record near the batch's records: in a range, or the nearest below/above it. */
export interface StoredNeighbour {
  d: string;
  s: string;
  seq: bigint;
  arrival_seq: bigint;
  quarantined: boolean;
  e_first_raw: number | null;
  e_last_raw: number | null;
  ct_turns: number | null;
  energy_reset: boolean;
  meter_reconfigured: boolean;
  /** 'p': nearest below a range (its own predecessor unknown); 'r': inside; 'n': nearest above. */
  role: 'p' | 'r' | 'n';
  /**
   * For 'p': the stream's last counter reading up to it (its own, else the nearest earlier
   * record's that has one), so a reset hidden behind records without a reading is still seen.
   * Null for the other roles, or when no earlier record has a reading.
   */
  counter_before: number | null;
}

/** A run of new seqs of one stream whose stored neighbours are read together. */
export interface SeqRange {
  d: string;
  s: string;
  lo: number;
  hi: number;
}

/** Seqs further apart than this start a new range (so one very late record does not fetch a whole stream). */
export const RANGE_GAP = 256;

const streamKey = (r: { deviceId: string; sid: string }): string => `${r.deviceId}\u0000${r.sid}`;

/** The batch without repeats (the first copy of a device, sid and seq wins). */
export function withoutRepeats(input: ParsedRecord[]): { records: ParsedRecord[]; repeats: number } {
  const seen = new Set<string>();
  const records: ParsedRecord[] = [];
  for (const r of input) {
    const key = `${streamKey(r)}\u0000${r.seq}`;
    if (seen.has(key)) continue;
    seen.add(key);
    records.push(r);
  }
  return { records, repeats: input.length - records.length };
}

/** The records not from before the latest clear of their device (marks by device id). */
export function withoutCleared(records: ParsedRecord[], marks: Map<string, ClearMark>): { records: ParsedRecord[]; cleared: number } {
  const kept = records.filter((r) => {
    const mark = marks.get(r.deviceId);
    return !mark || !fromBeforeClear(r, mark);
  });
  return { records: kept, cleared: records.length - kept.length };
}

/** The batch by stream (each sorted by seq), and the seq ranges whose stored neighbours are needed. */
export function streamsAndRanges(records: ParsedRecord[]): { streams: Map<string, ParsedRecord[]>; ranges: SeqRange[] } {
  const streams = new Map<string, ParsedRecord[]>();
  for (const r of records) {
    const list = streams.get(streamKey(r)) ?? [];
    list.push(r);
    streams.set(streamKey(r), list);
  }
  const ranges: SeqRange[] = [];
  for (const list of streams.values()) {
    list.sort((a, b) => a.seq - b.seq);
    let lo = list[0] as ParsedRecord;
    let hi = lo;
    for (const r of list.slice(1)) {
      if (r.seq - hi.seq > RANGE_GAP) {
        ranges.push({ d: lo.deviceId, s: lo.sid, lo: lo.seq, hi: hi.seq });
        lo = r;
      }
      hi = r;
    }
    ranges.push({ d: lo.deviceId, s: lo.sid, lo: lo.seq, hi: hi.seq });
  }
  return { streams, ranges };
}

export interface IngestPlan {
  /** Records not stored yet, with their flags. */
  fresh: Array<{ record: ParsedRecord; derived: DerivedFields }>;
  /** Stored records whose flags change (a new record now precedes them), by arrival number. */
  successorUpdates: Array<{ arrival: bigint; flags: DerivedFields }>;
}

/**
 * Walks each stream in seq order: a new record's predecessor is the nearest non-quarantined
 * record below it (stored or new); a stored record whose predecessor is now a new one gets its
 * flags recomputed. `nearby` is what the store read for the ranges.
 */
export function planIngest(streams: Map<string, ParsedRecord[]>, nearby: StoredNeighbour[]): IngestPlan {
  const storedByStream = new Map<string, Map<number, StoredNeighbour>>();
  for (const n of nearby) {
    const key = streamKey({ deviceId: n.d, sid: n.s });
    const bySeq = storedByStream.get(key) ?? new Map<number, StoredNeighbour>();
    const seq = Number(n.seq);
    const had = bySeq.get(seq);
    if (!had || had.role === 'p') bySeq.set(seq, n);
    storedByStream.set(key, bySeq);
  }

  const fresh: IngestPlan['fresh'] = [];
  const successorUpdates: IngestPlan['successorUpdates'] = [];
  for (const [key, list] of streams) {
    const stored = storedByStream.get(key) ?? new Map<number, StoredNeighbour>();
    const newOnes = list.filter((r) => !stored.has(r.seq));
    const derived = new Map<ParsedRecord, DerivedFields>();
    type Item = { seq: number; fresh?: ParsedRecord; stored?: StoredNeighbour };
    const chain: Item[] = [
      ...newOnes.filter((r) => !r.quarantined).map((r) => ({ seq: r.seq, fresh: r })),
      ...[...stored.values()].filter((n) => !n.quarantined).map((n) => ({ seq: Number(n.seq), stored: n })),
    ].sort((a, b) => a.seq - b.seq);
    let prev: Item | undefined;
    // The stream's last counter reading so far, and whether a new record gave it: a record's
    // reset is judged against it, across records that carry no reading.
    let lastCounter: number | null = null;
    let lastCounterIsNew = false;
    for (const item of chain) {
      const pred: Predecessor | null = prev
        ? { eLastRaw: lastCounter, ctTurns: prev.fresh ? prev.fresh.ctTurns : (prev.stored as StoredNeighbour).ct_turns }
        : null;
      if (item.fresh) {
        derived.set(item.fresh, deriveFields(item.fresh, pred));
      } else if (item.stored && item.stored.role !== 'p' && (prev?.fresh || lastCounterIsNew)) {
        const n = item.stored;
        const flags = deriveFields({ quarantined: false, eFirstRaw: n.e_first_raw, eLastRaw: n.e_last_raw, ctTurns: n.ct_turns }, pred);
        if (flags.energyReset !== n.energy_reset || flags.meterReconfigured !== n.meter_reconfigured) successorUpdates.push({ arrival: n.arrival_seq, flags });
      }
      const reading = item.fresh ? item.fresh.eLastRaw : (item.stored as StoredNeighbour).e_last_raw;
      if (reading !== null) {
        lastCounter = reading;
        lastCounterIsNew = item.fresh !== undefined;
      } else if (item.stored?.role === 'p') {
        lastCounter = item.stored.counter_before;
      }
      prev = item;
    }
    // Quarantined records have no predecessor: their flags come from themselves alone.
    for (const record of newOnes) fresh.push({ record, derived: derived.get(record) ?? deriveFields(record, null) });
  }
  return { fresh, successorUpdates };
}

/** The row a new record is stored as (column names of interval_records). */
export function storedRow(r: ParsedRecord, d: DerivedFields) {
  return {
    device_id: r.deviceId,
    sid: r.sid,
    seq: r.seq,
    start_at: r.startAt,
    time_quality: r.timeQuality,
    duration_s: r.durationS,
    reads_n: r.readsN,
    reads_err: r.readsErr,
    v_avg: r.v?.avg ?? null,
    v_min: r.v?.min ?? null,
    v_max: r.v?.max ?? null,
    i_avg: r.i?.avg ?? null,
    i_min: r.i?.min ?? null,
    i_max: r.i?.max ?? null,
    p_avg: r.p?.avg ?? null,
    p_min: r.p?.min ?? null,
    p_max: r.p?.max ?? null,
    f_avg: r.f?.avg ?? null,
    f_min: r.f?.min ?? null,
    f_max: r.f?.max ?? null,
    pf_avg: r.pf?.avg ?? null,
    pf_min: r.pf?.min ?? null,
    pf_max: r.pf?.max ?? null,
    e_first_raw: r.eFirstRaw,
    e_last_raw: r.eLastRaw,
    energy_used_wh: d.energyUsedWh,
    ct_turns: r.ctTurns,
    alarm_reads: r.alarmReads,
    partial: r.partial,
    energy_reset: d.energyReset,
    meter_reconfigured: d.meterReconfigured,
    quarantined: r.quarantined,
    quarantine_reason: r.quarantineReason,
    received_at: r.receivedAt,
  };
}

export type StoredRow = ReturnType<typeof storedRow>;
