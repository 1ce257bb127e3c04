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

interface Neighbour {
  k: number;
  present: boolean;
  p_seq: bigint | null;
  p_e_last: number | null;
  p_ct: number | null;
  n_seq: bigint | null;
  n_arrival: bigint | null;
  n_e_first: number | null;
  n_e_last: number | null;
  n_ct: number | null;
}

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

  // Clears: a record that started (or, without a start, arrived) before the device's latest clear is not stored.
  const devices = [...new Set(records.map((r) => r.deviceId))];
  const clears = await tx.$queryRawUnsafe<Array<{ device_id: string; cleared_at: Date }>>(
    'SELECT device_id, max(cleared_at) AS cleared_at FROM meter_clears WHERE device_id = ANY($1::text[]) GROUP BY device_id',
    devices,
  );
  const clearedAt = new Map(clears.map((c) => [c.device_id, c.cleared_at.getTime()]));
  const before = records.length;
  records = records.filter((r) => {
    const at = clearedAt.get(r.deviceId);
    return at === undefined || (r.startAt ?? r.receivedAt).getTime() >= at;
  });
  const cleared = before - records.length;
  if (records.length === 0) return { stored: 0, duplicates, cleared };

  // Neighbours already stored: whether the key exists, the previous and the next record of the stream.
  const neighbours = await tx.$queryRawUnsafe<Neighbour[]>(
    `SELECT k.k, EXISTS (SELECT 1 FROM interval_records x WHERE x.device_id = k.d AND x.sid = k.s AND x.seq = k.q) AS present,
            p.seq AS p_seq, p.e_last_raw AS p_e_last, p.ct_turns AS p_ct,
            n.seq AS n_seq, n.arrival_seq AS n_arrival, n.e_first_raw AS n_e_first, n.e_last_raw AS n_e_last, n.ct_turns AS n_ct
       FROM unnest($1::text[], $2::text[], $3::bigint[], $4::int[]) AS k(d, s, q, k)
       LEFT JOIN LATERAL (SELECT seq, e_last_raw, ct_turns FROM interval_records r
                           WHERE r.device_id = k.d AND r.sid = k.s AND r.seq < k.q AND NOT r.quarantined
                           ORDER BY r.seq DESC LIMIT 1) p ON true
       LEFT JOIN LATERAL (SELECT seq, arrival_seq, e_first_raw, e_last_raw, ct_turns FROM interval_records r
                           WHERE r.device_id = k.d AND r.sid = k.s AND r.seq > k.q AND NOT r.quarantined
                           ORDER BY r.seq ASC LIMIT 1) n ON true`,
    records.map((r) => r.deviceId),
    records.map((r) => r.sid),
    records.map((r) => r.seq),
    records.map((_, i) => i),
  );
  const byIndex = new Map(neighbours.map((n) => [Number(n.k), n]));
  const fresh = records.filter((_, i) => !byIndex.get(i)?.present);
  duplicates += records.length - fresh.length;
  if (fresh.length === 0) return { stored: 0, duplicates, cleared };
  const info = new Map(records.map((r, i) => [r, byIndex.get(i) as Neighbour]));

  // Streams in seq order: the predecessor of a record is the nearer of the stored one and the
  // previous new record of the same stream.
  const streams = new Map<string, ParsedRecord[]>();
  for (const r of fresh) {
    if (r.quarantined) continue;
    const list = streams.get(streamKey(r)) ?? [];
    list.push(r);
    streams.set(streamKey(r), list);
  }
  const derived = new Map<ParsedRecord, ReturnType<typeof deriveFields>>();
  const successorUpdates = new Map<bigint, { arrival: bigint; flags: ReturnType<typeof deriveFields> }>();
  for (const list of streams.values()) {
    list.sort((a, b) => a.seq - b.seq);
    let prevNew: ParsedRecord | undefined;
    for (const r of list) {
      const n = info.get(r) as Neighbour;
      const storedPrevSeq = n.p_seq === null ? -1 : Number(n.p_seq);
      let pred: Predecessor | null = n.p_seq === null ? null : { eLastRaw: n.p_e_last, ctTurns: n.p_ct };
      if (prevNew && prevNew.seq > storedPrevSeq) pred = { eLastRaw: prevNew.eLastRaw, ctTurns: prevNew.ctTurns };
      derived.set(r, deriveFields(r, pred));
      prevNew = r;
    }
    // The stored record right after each new one gets the nearest new record below it as predecessor.
    for (const r of list) {
      const n = info.get(r) as Neighbour;
      if (n.n_seq === null || n.n_arrival === null) continue;
      const nextSeq = Number(n.n_seq);
      const below = list.filter((x) => x.seq < nextSeq).at(-1) as ParsedRecord;
      const flags = deriveFields(
        { quarantined: false, eFirstRaw: n.n_e_first, eLastRaw: n.n_e_last, ctTurns: n.n_ct },
        { eLastRaw: below.eLastRaw, ctTurns: below.ctTurns },
      );
      successorUpdates.set(n.n_arrival, { arrival: n.n_arrival, flags });
    }
  }

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
       FROM jsonb_to_recordset($1::jsonb) AS x(device_id text, sid text, seq bigint, start_at timestamptz, time_quality text,
        duration_s int, reads_n int, reads_err int, v_avg float8, v_min float8, v_max float8, i_avg float8, i_min float8,
        i_max float8, p_avg float8, p_min float8, p_max float8, f_avg float8, f_min float8, f_max float8, pf_avg float8,
        pf_min float8, pf_max float8, e_first_raw float8, e_last_raw float8, energy_used_wh float8, ct_turns int,
        alarm_reads int, partial boolean, energy_reset boolean, meter_reconfigured boolean, quarantined boolean,
        quarantine_reason text, received_at timestamptz)
     ON CONFLICT (device_id, sid, seq) DO NOTHING`,
    JSON.stringify(rows),
  );
  if (successorUpdates.size > 0) {
    const updates = [...successorUpdates.values()];
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
