import { fromBeforeClear } from '../domain/clears';
import { deriveFields, type ParsedRecord, type Predecessor } from '../domain/record';
import { INGEST_LOCK_KEY, type MeterDb, type MeterTx } from './prisma';

export interface IngestResult {
  /** Records newly stored. */
  stored: number;
  /** Already stored (same device, sid, seq) or repeated inside the batch. */
  duplicates: number;
  /** From before a clear of their device: not stored. */
  cleared: number;
}

/** A stored record near the batch's records: in a range, or the nearest below/above it. */
interface StoredNeighbour {
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
}

/** Seqs further apart than this start a new range (so one very late record does not fetch a whole stream). */
const RANGE_GAP = 256;

const streamKey = (r: { deviceId: string; sid: string }): string => `${r.deviceId}\u0000${r.sid}`;

/**
 * Stores a batch of parsed interval records in one transaction: each (device, sid, seq) once
 * (INSERT ... ON CONFLICT DO NOTHING, one statement), records from before a clear of their
 * device dropped, flags computed against the previous record of the same stream, and the
 * flags of the following stored record recomputed when a late record lands before it.
 */
export async function ingestRecords(db: MeterDb, records: ParsedRecord[]): Promise<IngestResult> {
  if (records.length === 0) return { stored: 0, duplicates: 0, cleared: 0 };
  return db.$transaction(async (tx) => ingestInTx(tx, records), { timeout: 60_000, maxWait: 30_000 });
}

async function ingestInTx(tx: MeterTx, input: ParsedRecord[]): Promise<IngestResult> {
  await tx.$queryRawUnsafe('SELECT 1 AS locked FROM pg_advisory_xact_lock($1::bigint)', INGEST_LOCK_KEY);

  // One of each key: the first copy wins.
  const seen = new Set<string>();
  let records: ParsedRecord[] = [];
  for (const r of input) {
    const key = `${streamKey(r)}\u0000${r.seq}`;
    if (seen.has(key)) continue;
    seen.add(key);
    records.push(r);
  }
  let duplicates = input.length - records.length;

  // Clears: records from before the latest clear of their device are not stored.
  const devices = [...new Set(records.map((r) => r.deviceId))];
  const clears = await tx.$queryRawUnsafe<Array<{ device_id: string; cleared_at: Date; streams: Record<string, number>; max_start_at: Date | null }>>(
    `SELECT DISTINCT ON (device_id) device_id, cleared_at, streams, max_start_at FROM meter_clears
      WHERE device_id = ANY($1::text[]) ORDER BY device_id, cleared_at DESC, id DESC`,
    devices,
  );
  const marks = new Map(clears.map((c) => [c.device_id, { clearedAt: c.cleared_at, streams: c.streams, maxStartAt: c.max_start_at }]));
  const before = records.length;
  records = records.filter((r) => {
    const mark = marks.get(r.deviceId);
    return !mark || !fromBeforeClear(r, mark);
  });
  const cleared = before - records.length;
  if (records.length === 0) return { stored: 0, duplicates, cleared };

  // Stored records around the batch, per stream: every record inside each range of new seqs,
  // and the nearest non-quarantined one below and above it.
  const streams = new Map<string, ParsedRecord[]>();
  for (const r of records) {
    const list = streams.get(streamKey(r)) ?? [];
    list.push(r);
    streams.set(streamKey(r), list);
  }
  const ranges: Array<{ d: string; s: string; lo: number; hi: number }> = [];
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
  const cols = 'seq, arrival_seq, quarantined, e_first_raw, e_last_raw, ct_turns, energy_reset, meter_reconfigured';
  const nearby = await tx.$queryRawUnsafe<StoredNeighbour[]>(
    `SELECT g.d, g.s, x.* FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS g(d, s, lo, hi)
       CROSS JOIN LATERAL (
         (SELECT ${cols}, 'p' AS role FROM interval_records r WHERE r.device_id = g.d AND r.sid = g.s AND r.seq < g.lo AND NOT r.quarantined ORDER BY r.seq DESC LIMIT 1)
         UNION ALL
         (SELECT ${cols}, 'r' AS role FROM interval_records r WHERE r.device_id = g.d AND r.sid = g.s AND r.seq BETWEEN g.lo AND g.hi)
         UNION ALL
         (SELECT ${cols}, 'n' AS role FROM interval_records r WHERE r.device_id = g.d AND r.sid = g.s AND r.seq > g.hi AND NOT r.quarantined ORDER BY r.seq ASC LIMIT 1)
       ) x`,
    ranges.map((g) => g.d),
    ranges.map((g) => g.s),
    ranges.map((g) => g.lo),
    ranges.map((g) => g.hi),
  );
  const storedByStream = new Map<string, Map<number, StoredNeighbour>>();
  for (const n of nearby) {
    const key = streamKey({ deviceId: n.d, sid: n.s });
    const bySeq = storedByStream.get(key) ?? new Map<number, StoredNeighbour>();
    const seq = Number(n.seq);
    const had = bySeq.get(seq);
    if (!had || had.role === 'p') bySeq.set(seq, n);
    storedByStream.set(key, bySeq);
  }

  // Walk each stream in seq order: a new record's predecessor is the nearest non-quarantined
  // record below it (stored or new); a stored record whose predecessor is now a new one gets its
  // flags recomputed.
  const fresh: ParsedRecord[] = [];
  const derived = new Map<ParsedRecord, ReturnType<typeof deriveFields>>();
  const successorUpdates: Array<{ arrival: bigint; flags: ReturnType<typeof deriveFields> }> = [];
  for (const [key, list] of streams) {
    const stored = storedByStream.get(key) ?? new Map<number, StoredNeighbour>();
    const newOnes = list.filter((r) => !stored.has(r.seq));
    fresh.push(...newOnes);
    type Item = { seq: number; fresh?: ParsedRecord; stored?: StoredNeighbour };
    const chain: Item[] = [
      ...newOnes.filter((r) => !r.quarantined).map((r) => ({ seq: r.seq, fresh: r })),
      ...[...stored.values()].filter((n) => !n.quarantined).map((n) => ({ seq: Number(n.seq), stored: n })),
    ].sort((a, b) => a.seq - b.seq);
    let prev: Item | undefined;
    for (const item of chain) {
      const pred: Predecessor | null = prev
        ? prev.fresh
          ? { eLastRaw: prev.fresh.eLastRaw, ctTurns: prev.fresh.ctTurns }
          : { eLastRaw: (prev.stored as StoredNeighbour).e_last_raw, ctTurns: (prev.stored as StoredNeighbour).ct_turns }
        : null;
      if (item.fresh) {
        derived.set(item.fresh, deriveFields(item.fresh, pred));
      } else if (item.stored && item.stored.role !== 'p' && prev?.fresh) {
        const n = item.stored;
        const flags = deriveFields({ quarantined: false, eFirstRaw: n.e_first_raw, eLastRaw: n.e_last_raw, ctTurns: n.ct_turns }, pred);
        if (flags.energyReset !== n.energy_reset || flags.meterReconfigured !== n.meter_reconfigured) successorUpdates.push({ arrival: n.arrival_seq, flags });
      }
      prev = item;
    }
  }
  duplicates += records.length - fresh.length;
  if (fresh.length === 0) return { stored: 0, duplicates, cleared };

  const rows = fresh.map((r) => {
    const d = derived.get(r) ?? deriveFields(r, null);
    return {
      device_id: r.deviceId,
      sid: r.sid,
      seq: r.seq,
      start_at: r.startAt?.toISOString() ?? null,
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
      received_at: r.receivedAt.toISOString(),
    };
  });
  const stored = await tx.$executeRawUnsafe(
    `INSERT INTO interval_records (device_id, sid, seq, start_at, time_quality, duration_s, reads_n, reads_err,
        v_avg, v_min, v_max, i_avg, i_min, i_max, p_avg, p_min, p_max, f_avg, f_min, f_max, pf_avg, pf_min, pf_max,
        e_first_raw, e_last_raw, energy_used_wh, ct_turns, alarm_reads, partial, energy_reset, meter_reconfigured,
        quarantined, quarantine_reason, received_at)
     SELECT device_id, sid, seq, start_at, time_quality, duration_s, reads_n, reads_err,
        v_avg, v_min, v_max, i_avg, i_min, i_max, p_avg, p_min, p_max, f_avg, f_min, f_max, pf_avg, pf_min, pf_max,
        e_first_raw, e_last_raw, energy_used_wh, ct_turns, alarm_reads, partial, energy_reset, meter_reconfigured,
        quarantined, quarantine_reason, received_at
       FROM json_to_recordset($1::json) AS x(device_id text, sid text, seq bigint, start_at timestamptz, time_quality text,
        duration_s int, reads_n int, reads_err int, v_avg float8, v_min float8, v_max float8, i_avg float8, i_min float8,
        i_max float8, p_avg float8, p_min float8, p_max float8, f_avg float8, f_min float8, f_max float8, pf_avg float8,
        pf_min float8, pf_max float8, e_first_raw float8, e_last_raw float8, energy_used_wh float8, ct_turns int,
        alarm_reads int, partial boolean, energy_reset boolean, meter_reconfigured boolean, quarantined boolean,
        quarantine_reason text, received_at timestamptz)
     ON CONFLICT (device_id, sid, seq) DO NOTHING`,
    JSON.stringify(rows),
  );
  if (successorUpdates.length > 0) {
    const updates = successorUpdates;
    await tx.$executeRawUnsafe(
      `UPDATE interval_records r SET energy_reset = u.reset, meter_reconfigured = u.reconf
         FROM unnest($1::bigint[], $2::boolean[], $3::boolean[]) AS u(a, reset, reconf) WHERE r.arrival_seq = u.a`,
      updates.map((u) => u.arrival),
      updates.map((u) => u.flags.energyReset),
      updates.map((u) => u.flags.meterReconfigured),
    );
  }
  // The committed high-water mark of arrival sequence numbers (bookmarks never point past it).
  await tx.$executeRawUnsafe(
    `UPDATE meter_state SET arrival_hwm = GREATEST(arrival_hwm, (SELECT COALESCE(max(arrival_seq), 0) FROM interval_records)) WHERE id = 1`,
  );
  return { stored, duplicates: duplicates + (fresh.length - stored), cleared };
}
