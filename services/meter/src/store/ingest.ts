import { recordPartnerEvents } from '@fleet/service-kit';
import type { ClearMark } from '../domain/clears';
import { RECORDS_PER_EVENT, recordsStoredData } from '../domain/events';
import { planIngest, storedRow, streamsAndRanges, withoutCleared, withoutRepeats, type SeqRange, type StoredNeighbour } from '../domain/ingest-plan';
import type { ParsedRecord } from '../domain/record';
import { LISTED_RECORD } from '../domain/view';
import { addToDayEnergySql, refreshDayEnergy } from './day-energy';
import { INGEST_LOCK_KEY, type MeterDb, type MeterTx } from './prisma';
import { AGGREGATED_COLUMNS, upsertRollups } from './rollup-sql';
import { recomputeRollups } from './rollups';

export interface IngestResult {
  /** Records newly stored. */
  stored: number;
  /** Already stored (same device, sid, seq) or repeated inside the batch. */
  duplicates: number;
  /** From before a clear of their device: not stored. */
  cleared: number;
  /** Of the stored records, those quarantined, by reason. */
  quarantined?: Record<string, number>;
}

/**
 * Stores a batch of parsed interval records in one transaction: each (device, sid, seq) once
 * (INSERT ... ON CONFLICT DO NOTHING, one statement), records from before a clear of their
 * device dropped, flags computed against the previous record of the same stream, and the
 * flags of the following stored record recomputed when a late record lands before it. The
 * rollups (store/rollups.ts) and the day energy rows (store/day-energy.ts) take the new records in
 * the same statement that inserts them (a day energy row left stale is recomputed right after); the
 * `meter.records_stored` events (recordsStoredEvents) go into the outbox in the same transaction.
 */
export async function ingestRecords(db: MeterDb, records: ParsedRecord[]): Promise<IngestResult> {
  if (records.length === 0) return { stored: 0, duplicates: 0, cleared: 0 };
  return db.$transaction(async (tx) => ingestInTx(tx, records), { timeout: 60_000, maxWait: 30_000 });
}

async function ingestInTx(tx: MeterTx, input: ParsedRecord[]): Promise<IngestResult> {
  await tx.$queryRawUnsafe('SELECT 1 AS locked FROM pg_advisory_xact_lock($1::bigint)', INGEST_LOCK_KEY);

  const unique = withoutRepeats(input);
  let duplicates = unique.repeats;
  const { records, cleared } = withoutCleared(unique.records, await latestClears(tx, [...new Set(unique.records.map((r) => r.deviceId))]));
  if (records.length === 0) return { stored: 0, duplicates, cleared };

  const { streams, ranges } = streamsAndRanges(records);
  const { fresh, successorUpdates } = planIngest(streams, await storedNear(tx, ranges));
  duplicates += records.length - fresh.length;
  if (fresh.length === 0) return { stored: 0, duplicates, cleared };

  const rows = fresh.map(({ record, derived }) => storedRow(record, derived));
  // One statement: the records, what they add to the rollups (only rows actually inserted), and
  // per device (in parts of at most RECORDS_PER_EVENT) how many listed records (LISTED_RECORD)
  // were inserted and the arrival bookmark just before them: what the `meter.records_stored`
  // events below announce. Records without identity are stored but never listed or announced.
  const inserted = await tx.$queryRawUnsafe<StoredPart[]>(
    `WITH fresh AS (
     INSERT INTO interval_records (device_id, sid, seq, start_at, time_quality, duration_s, reads_n, reads_err,
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
     ON CONFLICT (device_id, sid, seq) DO NOTHING
     RETURNING arrival_seq, sid, ${AGGREGATED_COLUMNS}
     ), rolled_up AS (
     ${upsertRollups('fresh', 'add')}
     ), day_energy AS (
     ${addToDayEnergySql('fresh')}
     )
     SELECT (SELECT json_agg(json_build_array(device_id, day_s)) FROM day_energy WHERE stale)::text AS stale_days,
            device_id, count(*)::int AS stored, (count(*) FILTER (WHERE listed))::int AS listed, min(arrival_seq) FILTER (WHERE listed) - 1 AS after
       FROM (SELECT device_id, arrival_seq, listed,
                    (row_number() OVER (PARTITION BY device_id, listed ORDER BY arrival_seq) - 1) / ${RECORDS_PER_EVENT} AS part
               FROM (SELECT device_id, arrival_seq, ${LISTED_RECORD} AS listed FROM fresh) x) f
      GROUP BY device_id, part ORDER BY device_id, part`,
    JSON.stringify(rows),
  );
  const stored = inserted.reduce((n, part) => n + Number(part.stored), 0);
  // Day energy rows that records for earlier slots made stale: recomputed from the slot rollups just written.
  const stale = JSON.parse(inserted[0]?.stale_days ?? 'null') as Array<[string, number]> | null;
  await refreshDayEnergy(tx, (stale ?? []).map(([deviceId, dayS]) => ({ deviceId, dayS })));
  if (successorUpdates.length > 0) {
    const updates = successorUpdates;
    await tx.$executeRawUnsafe(
      `UPDATE interval_records r SET energy_reset = u.reset, meter_reconfigured = u.reconf
         FROM unnest($1::bigint[], $2::boolean[], $3::boolean[]) AS u(a, reset, reconf) WHERE r.arrival_seq = u.a`,
      updates.map((u) => u.arrival),
      updates.map((u) => u.flags.energyReset),
      updates.map((u) => u.flags.meterReconfigured),
    );
    // Their energy_reset counts in the rollups of their spans.
    await recomputeRollups(tx, updates.map((u) => u.arrival));
  }
  // The committed high-water mark of arrival sequence numbers (bookmarks never point past it).
  const state = await tx.$queryRawUnsafe<Array<{ epoch: string }>>(
    `UPDATE meter_state SET arrival_hwm = GREATEST(arrival_hwm, (SELECT COALESCE(max(arrival_seq), 0) FROM interval_records)) WHERE id = 1 RETURNING epoch`,
  );
  await recordsStoredEvents(tx, state[0]?.epoch ?? '', inserted);
  return { stored, duplicates: duplicates + (fresh.length - stored), cleared, quarantined: quarantinedByReason(rows) };
}

/**
 * One `meter.records_stored` per device with listed records (LISTED_RECORD) newly stored in this
 * batch (one per RECORDS_PER_EVENT of them), in the batch's transaction: a batch rolled back announces
 * nothing, and a redelivered batch stores nothing new, so it announces nothing again. One
 * statement for the whole batch.
 *
 * Why `GET .../intervals?cursor=<cursor>&limit=<count>` lists exactly these records, even with
 * several meter replicas ingesting at once: arrival order is decided under the ingest lock
 * (INGEST_LOCK_KEY, taken first in this transaction and held until it ends). Every arrival_seq
 * of this batch is drawn after the previous holder committed and before the next one can draw
 * any, so batches never interleave in arrival order: the device's listed records after the
 * bookmark (the arrival_seq before its first new listed record) are this batch's, in order, and
 * then only those of later batches; `limit=<count>` stops at the last of this batch's. (Records
 * without identity are passed over by the listing and counted by no event.) Sequence values
 * lost to rolled-back batches are gaps no record fills. A part after the first starts after the
 * previous part's last record the same way. (A clear of the device after the batch hides its
 * records from every listing, these included.)
 */
async function recordsStoredEvents(tx: MeterTx, epoch: string, parts: StoredPart[]): Promise<void> {
  const occurredAt = new Date();
  await recordPartnerEvents(
    tx,
    parts
      .filter((p) => Number(p.listed) > 0 && p.after !== null)
      .map((p) => ({
        type: 'meter.records_stored' as const,
        deviceId: p.device_id,
        data: recordsStoredData(p.device_id, epoch, Number(p.after), Number(p.listed)),
        occurredAt,
      })),
  );
}

/**
 * A device's records inserted by a batch, in parts of at most RECORDS_PER_EVENT listed ones:
 * all of them (`stored`), the listed ones (`listed`, LISTED_RECORD) and the arrival bookmark just
 * before the first listed one (`after`, null without any).
 */
interface StoredPart {
  /** JSON [[device_id, day_s], ...] of the day energy rows left stale by the batch (the same on every part), or null. */
  stale_days: string | null;
  device_id: string;
  stored: number;
  listed: number;
  after: bigint | null;
}

/**
 * Quarantine reasons of the rows inserted. Under the ingest lock every fresh row is stored (the
 * plan already left out what is stored), so these are the stored records' reasons.
 */
function quarantinedByReason(rows: Array<{ quarantine_reason: string | null }>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of rows) if (r.quarantine_reason) counts[r.quarantine_reason] = (counts[r.quarantine_reason] ?? 0) + 1;
  return counts;
}

/** The latest clear of each device (what records from before it are told by). */
async function latestClears(tx: MeterTx, devices: string[]): Promise<Map<string, ClearMark>> {
  const clears = await tx.$queryRawUnsafe<Array<{ device_id: string; cleared_at: Date; streams: Record<string, number>; max_start_at: Date | null; meter_clock_at_clear: Date | null }>>(
    `SELECT DISTINCT ON (device_id) device_id, cleared_at, streams, max_start_at, meter_clock_at_clear FROM meter_clears
      WHERE device_id = ANY($1::text[]) ORDER BY device_id, cleared_at DESC, id DESC`,
    devices,
  );
  return new Map(clears.map((c) => [c.device_id, { clearedAt: c.cleared_at, streams: c.streams, maxStartAt: c.max_start_at, meterClockAtClear: c.meter_clock_at_clear }]));
}

/**
 * Stored records around the ranges: every record inside each, the nearest non-quarantined one
 * below (with the stream's last counter reading up to it), and those above up to the first that
 * read the counter. A record's reset is judged against the stream's last reading before it,
 * across records that read none, so a late record can change the flag of any record up to that
 * one (with none later, only the nearest: its CT turns are judged against the late record's).
 * At most SUCCESSORS_READ of them: a stream that long without a reading is a meter whose counter
 * is not read at all.
 */
const SUCCESSORS_READ = 100;

function storedNear(tx: MeterTx, ranges: SeqRange[]): Promise<StoredNeighbour[]> {
  const cols = 'seq, arrival_seq, quarantined, e_first_raw, e_last_raw, ct_turns, energy_reset, meter_reconfigured';
  return tx.$queryRawUnsafe<StoredNeighbour[]>(
    `SELECT g.d, g.s, x.* FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS g(d, s, lo, hi)
       CROSS JOIN LATERAL (
         (SELECT ${cols}, 'p' AS role,
                 COALESCE(r.e_last_raw, (SELECT c.e_last_raw FROM interval_records c
                                          WHERE c.device_id = g.d AND c.sid = g.s AND c.seq < r.seq AND NOT c.quarantined AND c.e_last_raw IS NOT NULL
                                          ORDER BY c.seq DESC LIMIT 1)) AS counter_before
            FROM interval_records r WHERE r.device_id = g.d AND r.sid = g.s AND r.seq < g.lo AND NOT r.quarantined ORDER BY r.seq DESC LIMIT 1)
         UNION ALL
         (SELECT ${cols}, 'r' AS role, NULL::float8 AS counter_before FROM interval_records r WHERE r.device_id = g.d AND r.sid = g.s AND r.seq BETWEEN g.lo AND g.hi)
         UNION ALL
         (SELECT ${cols}, 'n' AS role, NULL::float8 AS counter_before FROM interval_records r
            WHERE r.device_id = g.d AND r.sid = g.s AND r.seq > g.hi AND NOT r.quarantined
              AND r.seq <= COALESCE(
                (SELECT c.seq FROM interval_records c
                  WHERE c.device_id = g.d AND c.sid = g.s AND c.seq > g.hi AND NOT c.quarantined AND c.e_last_raw IS NOT NULL
                  ORDER BY c.seq ASC LIMIT 1),
                (SELECT c.seq FROM interval_records c
                  WHERE c.device_id = g.d AND c.sid = g.s AND c.seq > g.hi AND NOT c.quarantined
                  ORDER BY c.seq ASC LIMIT 1))
            ORDER BY r.seq ASC LIMIT ${SUCCESSORS_READ})
       ) x`,
    ranges.map((g) => g.d),
    ranges.map((g) => g.s),
    ranges.map((g) => g.lo),
    ranges.map((g) => g.hi),
  );
}
