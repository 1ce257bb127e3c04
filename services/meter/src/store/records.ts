import type { StartKey, Window } from '../domain/query';
import { QUANTITIES, type QuantityAcc, type Quantity } from '../domain/summary';
import { RECORD_COLUMNS, type RecordRow } from '../domain/view';
import { INGEST_LOCK_KEY, type MeterDb } from './prisma';

/** Reads of interval records: both listing modes, summary sums and energy sums. */

export async function readState(db: MeterDb): Promise<{ epoch: string; hwm: number }> {
  const rows = await db.$queryRawUnsafe<Array<{ epoch: string; arrival_hwm: bigint }>>('SELECT epoch, arrival_hwm FROM meter_state WHERE id = 1');
  const row = rows[0];
  if (!row) throw new Error('meter_state row missing');
  return { epoch: row.epoch, hwm: Number(row.arrival_hwm) };
}

/** Records by start time, oldest first by (start, sid, seq), after the key; limit + 1 rows to tell has_more. */
export async function listByStart(db: MeterDb, deviceId: string, window: Window, after: StartKey | null, limit: number): Promise<RecordRow[]> {
  const params: unknown[] = [deviceId, window.start, window.end, limit + 1];
  let keyClause = '';
  if (after) {
    params.push(new Date(after[0] ?? 0), after[1], after[2]);
    keyClause = 'AND (start_at, sid, seq) > ($5::timestamptz, $6::text, $7::bigint)';
  }
  return db.$queryRawUnsafe<RecordRow[]>(
    `SELECT ${RECORD_COLUMNS} FROM interval_records
      WHERE device_id = $1 AND NOT cleared AND start_at >= $2 AND start_at < $3 ${keyClause}
      ORDER BY start_at, sid, seq LIMIT $4`,
    ...params,
  );
}

/** Records without a determinable start, by (sid, seq). */
export async function listUnknownTime(db: MeterDb, deviceId: string, after: StartKey | null, limit: number): Promise<RecordRow[]> {
  const params: unknown[] = [deviceId, limit + 1];
  let keyClause = '';
  if (after) {
    params.push(after[1], after[2]);
    keyClause = 'AND (sid, seq) > ($3::text, $4::bigint)';
  }
  return db.$queryRawUnsafe<RecordRow[]>(
    `SELECT ${RECORD_COLUMNS} FROM interval_records
      WHERE device_id = $1 AND NOT cleared AND start_at IS NULL ${keyClause}
      ORDER BY sid, seq LIMIT $2`,
    ...params,
  );
}

/**
 * Records in arrival order after a bookmark (or received since a time), never past the
 * committed high-water mark read in the same transaction.
 */
export async function listByArrival(
  db: MeterDb,
  deviceId: string,
  from: { afterArrival: number } | { receivedSince: Date },
  limit: number,
): Promise<{ rows: RecordRow[]; epoch: string; hwm: number }> {
  return db.$transaction(async (tx) => {
    const state = await tx.$queryRawUnsafe<Array<{ epoch: string; arrival_hwm: bigint }>>('SELECT epoch, arrival_hwm FROM meter_state WHERE id = 1');
    const epoch = state[0]?.epoch ?? '';
    const hwm = Number(state[0]?.arrival_hwm ?? 0);
    const rows =
      'afterArrival' in from
        ? await tx.$queryRawUnsafe<RecordRow[]>(
            `SELECT ${RECORD_COLUMNS} FROM interval_records
              WHERE device_id = $1 AND NOT cleared AND arrival_seq > $2 AND arrival_seq <= $3 ORDER BY arrival_seq LIMIT $4`,
            deviceId,
            from.afterArrival,
            hwm,
            limit + 1,
          )
        : await tx.$queryRawUnsafe<RecordRow[]>(
            `SELECT ${RECORD_COLUMNS} FROM interval_records
              WHERE device_id = $1 AND NOT cleared AND received_at >= $2 AND arrival_seq <= $3 ORDER BY arrival_seq LIMIT $4`,
            deviceId,
            from.receivedSince,
            hwm,
            limit + 1,
          );
    return { rows, epoch, hwm };
  }, { isolationLevel: 'RepeatableRead' });
}

const COLUMN: Record<Quantity, string> = { voltage_v: 'v', current_a: 'i', power_w: 'p', frequency_hz: 'f', power_factor: 'pf' };
const CARRIES = 'NOT quarantined AND reads_n > 0 AND duration_s > 0';
/** The power-factor load rule: highest power before CT correction reached 5 W. */
const LOAD = "round((p_max * COALESCE(ct_turns, 1))::numeric, 6) >= 5";

export interface SummarySums {
  records: number;
  quarantined: number;
  seconds: number;
  quantities: Record<Quantity, QuantityAcc>;
}

/** The summary's sums over the records that start in the window (the domain finishes them). */
export async function summarySums(db: MeterDb, deviceId: string, window: Window): Promise<SummarySums> {
  const parts = QUANTITIES.map((q) => {
    const c = COLUMN[q];
    const cond = `${CARRIES} AND ${c}_avg IS NOT NULL${q === 'power_factor' ? ` AND ${LOAD}` : ''}`;
    return (
      `sum(${c}_avg * duration_s) FILTER (WHERE ${cond}) AS ${c}_w, sum(duration_s) FILTER (WHERE ${cond}) AS ${c}_s, ` +
      `min(${c}_min) FILTER (WHERE ${cond}) AS ${c}_lo, max(${c}_max) FILTER (WHERE ${cond}) AS ${c}_hi, count(*) FILTER (WHERE ${cond}) AS ${c}_n`
    );
  });
  const rows = await db.$queryRawUnsafe<Array<Record<string, unknown>>>(
    `SELECT count(*) AS records, count(*) FILTER (WHERE quarantined) AS quarantined,
            COALESCE(sum(duration_s) FILTER (WHERE NOT quarantined), 0) AS seconds, ${parts.join(', ')}
       FROM interval_records WHERE device_id = $1 AND NOT cleared AND start_at >= $2 AND start_at < $3`,
    deviceId,
    window.start,
    window.end,
  );
  const r = rows[0] ?? {};
  const n = (x: unknown): number => (x === null || x === undefined ? 0 : Number(x));
  const orNull = (x: unknown): number | null => (x === null || x === undefined ? null : Number(x));
  const quantities = Object.fromEntries(
    QUANTITIES.map((q) => {
      const c = COLUMN[q];
      return [q, { weighted: n(r[`${c}_w`]), seconds: n(r[`${c}_s`]), min: orNull(r[`${c}_lo`]), max: orNull(r[`${c}_hi`]), intervals: n(r[`${c}_n`]) }];
    }),
  ) as Record<Quantity, QuantityAcc>;
  return { records: n(r.records), quarantined: n(r.quarantined), seconds: n(r.seconds), quantities };
}

const ENERGY_ROWS = 'device_id = $1 AND NOT cleared AND NOT quarantined AND energy_used_wh IS NOT NULL AND start_at >= $2 AND start_at < $3';

export interface EnergySum {
  energyWh: number | null;
  intervals: number;
  resets: number;
}

/**
 * Energy over the window: Wh, records with a counter reading, resets. Each record's Wh has 6
 * decimals, so they are summed exactly as whole micro-watt-hours (independent of row order):
 * the summary and the energy route give the same total.
 */
export async function energySum(db: MeterDb, deviceId: string, window: Window): Promise<EnergySum> {
  const rows = await db.$queryRawUnsafe<Array<{ uwh: string | null; n: bigint; resets: bigint }>>(
    `SELECT sum(round(energy_used_wh * 1000000)::bigint)::text AS uwh, count(*) AS n, count(*) FILTER (WHERE energy_reset) AS resets FROM interval_records WHERE ${ENERGY_ROWS}`,
    deviceId,
    window.start,
    window.end,
  );
  const r = rows[0];
  return { energyWh: r?.uwh === null || r?.uwh === undefined ? null : Number(r.uwh) / 1e6, intervals: Number(r?.n ?? 0), resets: Number(r?.resets ?? 0) };
}

/**
 * Energy per bucket and over the whole window in one pass: boundaries are the buckets' start
 * instants (ms) followed by the last end; each row is placed with width_bucket. The total is the
 * same exact sum (whole micro-watt-hours) as energySum's.
 */
export async function energyByBucket(
  db: MeterDb,
  deviceId: string,
  window: Window,
  boundariesMs: number[],
): Promise<{ buckets: Array<{ index: number; energyWh: number; intervals: number; resets: number }>; total: EnergySum }> {
  const rows = await db.$queryRawUnsafe<Array<{ b: number | null; uwh: string | null; n: bigint; resets: bigint }>>(
    `SELECT width_bucket(extract(epoch FROM start_at)::float8 * 1000, $4::float8[]) - 1 AS b,
            sum(round(energy_used_wh * 1000000)::bigint)::text AS uwh, count(*) AS n, count(*) FILTER (WHERE energy_reset) AS resets
       FROM interval_records WHERE ${ENERGY_ROWS} GROUP BY GROUPING SETS ((1), ())`,
    deviceId,
    window.start,
    window.end,
    boundariesMs,
  );
  let total: EnergySum = { energyWh: null, intervals: 0, resets: 0 };
  const buckets: Array<{ index: number; energyWh: number; intervals: number; resets: number }> = [];
  for (const r of rows) {
    const wh = r.uwh === null ? null : Number(r.uwh) / 1e6;
    if (r.b === null) total = { energyWh: wh, intervals: Number(r.n), resets: Number(r.resets) };
    else buckets.push({ index: Number(r.b), energyWh: wh ?? 0, intervals: Number(r.n), resets: Number(r.resets) });
  }
  return { buckets, total };
}

/**
 * Clears a meter after testing: every record received so far stops being listed, and records
 * from before the clear are not stored if they arrive later (see MeterClear and
 * domain/clears.ts). Holds the ingest lock so no batch interleaves.
 */
export async function clearDevice(db: MeterDb, deviceId: string, now = new Date()): Promise<{ cleared_records: number; cleared_at: string }> {
  return db.$transaction(async (tx) => {
    await tx.$queryRawUnsafe('SELECT 1 AS locked FROM pg_advisory_xact_lock($1::bigint)', INGEST_LOCK_KEY);
    const count = await tx.$executeRawUnsafe('UPDATE interval_records SET cleared = true WHERE device_id = $1 AND NOT cleared', deviceId);
    // Marks in the meter's own terms, over every record of the device (earlier clears included).
    const streams = await tx.$queryRawUnsafe<Array<{ sid: string; max_seq: bigint }>>(
      "SELECT sid, max(seq) AS max_seq FROM interval_records WHERE device_id = $1 AND sid NOT LIKE '#%' GROUP BY sid",
      deviceId,
    );
    const latest = await tx.$queryRawUnsafe<Array<{ max_start: Date | null }>>('SELECT max(start_at) AS max_start FROM interval_records WHERE device_id = $1', deviceId);
    await tx.meterClear.create({
      data: {
        deviceId,
        clearedAt: now,
        records: count,
        streams: Object.fromEntries(streams.map((s) => [s.sid, Number(s.max_seq)])),
        maxStartAt: latest[0]?.max_start ?? null,
      },
    });
    return { cleared_records: count, cleared_at: now.toISOString() };
  });
}
