/**
 * Summary and energy answers computed from the raw records alone, as the service computed them
 * before rollups: the reference every rollup-based answer must equal. Same arithmetic (the
 * expressions of store/rollup-sql.ts), no rollups, no read plan.
 */
import { bucketLabel, bucketsFor, energyTotal, type Bucket, type BucketWidth } from '../src/domain/energy';
import { round6 } from '../src/domain/record';
import type { Window } from '../src/domain/query';
import { finishQuantity, QUANTITIES } from '../src/domain/summary';
import type { MeterDb } from '../src/store/prisma';
import { AGGREGATED_COLUMNS, IN_ENERGY, MICRO_WH, QUANTITY_COLUMNS, recordTotals, ROLLUP_VALUES } from '../src/store/rollup-sql';

const IN_WINDOW = 'device_id = $1 AND NOT cleared AND start_at >= $2 AND start_at < $3';
const num = (x: unknown): number => (x === null || x === undefined ? 0 : Number(x));

export interface ReferenceBucketSum {
  index: number;
  energyWh: number;
  intervals: number;
  resets: number;
}

/**
 * The points of an energy answer as objects, as the service built them before it wrote them as
 * bytes (domain/energy-answer.ts): the reference its bytes must equal once stringified.
 */
export function referencePoints(buckets: Bucket[], sums: ReferenceBucketSum[]): Array<{ start_at: string; energy_wh: number | null; reset: boolean }> {
  const byIndex = new Map(sums.map((s) => [s.index, s]));
  return buckets.map((b, i) => {
    const s = byIndex.get(i);
    return { start_at: bucketLabel(b), energy_wh: s && s.intervals > 0 ? round6(s.energyWh) : null, reset: (s?.resets ?? 0) > 0 };
  });
}

/** The energy answer's points and total from every raw record of the window. */
export async function rawEnergyAnswer(db: MeterDb, deviceId: string, window: Window, width: BucketWidth, zone: string | undefined) {
  const buckets = bucketsFor(window.start, window.end, width, zone);
  const boundaries = [...buckets.map((b) => b.start), (buckets.at(-1) as { end: number }).end];
  const rows = await db.$queryRawUnsafe<Array<{ b: number | null; uwh: string | null; n: bigint; resets: bigint }>>(
    `SELECT width_bucket((extract(epoch FROM start_at) * 1000)::bigint, $4::bigint[]) - 1 AS b,
            sum(${MICRO_WH})::text AS uwh, count(*) AS n, count(*) FILTER (WHERE energy_reset) AS resets
       FROM interval_records WHERE ${IN_WINDOW} AND ${IN_ENERGY} GROUP BY GROUPING SETS ((1), ())`,
    deviceId,
    window.start,
    window.end,
    boundaries,
  );
  const sums = rows.filter((r) => r.b !== null).map((r) => ({ index: Number(r.b), energyWh: num(r.uwh) / 1e6, intervals: Number(r.n), resets: Number(r.resets) }));
  const total = rows.find((r) => r.b === null);
  const n = Number(total?.n ?? 0);
  return {
    points: referencePoints(buckets, sums),
    total: energyTotal({ energyWh: n > 0 ? num(total?.uwh) / 1e6 : null, intervals: n, resets: Number(total?.resets ?? 0) }, buckets.length),
  };
}

/** The summary's coverage, quantities and energy from every raw record of the window. */
export async function rawSummaryAnswer(db: MeterDb, deviceId: string, window: Window) {
  const rows = await db.$queryRawUnsafe<Array<Record<string, unknown>>>(
    `SELECT ${ROLLUP_VALUES.map((c) => `${c}::text AS ${c}`).join(', ')} FROM (${recordTotals(`(SELECT * FROM interval_records WHERE ${IN_WINDOW}) w`, 'all')}) a`,
    deviceId,
    window.start,
    window.end,
  );
  const r = rows[0] ?? {};
  const quantities = Object.fromEntries(
    QUANTITIES.map((q, k) => {
      const c = QUANTITY_COLUMNS[k] as string;
      const lo = r[`${c}_lo`];
      const hi = r[`${c}_hi`];
      return [q, finishQuantity({ weighted: num(r[`${c}_w`]) / 1e6, seconds: num(r[`${c}_s`]), min: lo === null ? null : Number(lo), max: hi === null ? null : Number(hi), intervals: num(r[`${c}_n`]) })];
    }),
  );
  const energy = energyTotal({ energyWh: num(r.e_n) > 0 ? num(r.e_uwh) / 1e6 : null, intervals: num(r.e_n), resets: num(r.e_resets) }, 0);
  return {
    coverage: { records: num(r.records), quarantined: num(r.quarantined), seconds: num(r.seconds) },
    ...quantities,
    energy_wh: energy ? { total: energy.energy_wh, resets: energy.resets, intervals: energy.intervals } : null,
  };
}

/**
 * Rollup rows as stored, and as recomputed from every raw record (each span summed from the
 * records directly, not from slots), as text, in key order.
 */
export async function rollupsStoredAndRecomputed(db: Pick<MeterDb, '$queryRawUnsafe'>, deviceIds: string[]): Promise<{ stored: string[]; recomputed: string[] }> {
  const values = ROLLUP_VALUES.map((c) => `${c}::text`).join(", ' ', ");
  const stored = await db.$queryRawUnsafe<Array<{ row: string }>>(
    `SELECT concat_ws(' ', device_id, span, start_s, ${values}) AS row FROM meter_rollups WHERE device_id = ANY($1::text[]) ORDER BY device_id, span, start_s`,
    deviceIds,
  );
  // Records moved to the start of their span are summed per "slot" of that span.
  const perSpan = [900, 3600, 86_400].map((span) => {
    const columns = AGGREGATED_COLUMNS.replace('start_at', `to_timestamp(floor(extract(epoch FROM start_at) / ${span}) * ${span}) AS start_at`);
    return `SELECT device_id, ${span} AS span, start_s, ${ROLLUP_VALUES.join(', ')} FROM (${recordTotals(
      `(SELECT ${columns} FROM interval_records WHERE device_id = ANY($1::text[]) AND NOT cleared) r`,
      'slot',
    )}) s`;
  });
  const recomputed = await db.$queryRawUnsafe<Array<{ row: string }>>(
    `SELECT concat_ws(' ', device_id, span, start_s, ${values}) AS row FROM (${perSpan.join(' UNION ALL ')}) r ORDER BY device_id, span, start_s`,
    deviceIds,
  );
  return { stored: stored.map((r) => r.row), recomputed: recomputed.map((r) => r.row) };
}

/**
 * Day energy rows as stored, and as recomputed from every raw record (each running sum added up
 * from the records that start in or before its slot, not from the slot rollups), as text, in
 * key order.
 */
export async function dayEnergyStoredAndRecomputed(db: Pick<MeterDb, '$queryRawUnsafe'>, deviceIds: string[]): Promise<{ stored: string[]; recomputed: string[] }> {
  const stored = await db.$queryRawUnsafe<Array<{ row: string }>>(
    `SELECT concat_ws(' ', device_id, day_s, slot_ends::text, e_uwh::text, e_n::text, e_resets::text) AS row FROM meter_day_energy
      WHERE device_id = ANY($1::text[]) ORDER BY device_id, day_s`,
    deviceIds,
  );
  const recomputed = await db.$queryRawUnsafe<Array<{ row: string }>>(
    `WITH r AS (
       SELECT device_id, start_at, floor(extract(epoch FROM start_at) / 86400)::bigint * 86400 AS day_s, ${MICRO_WH} AS uwh, energy_reset::int AS reset
         FROM interval_records WHERE device_id = ANY($1::text[]) AND NOT cleared AND start_at IS NOT NULL AND ${IN_ENERGY}
     ), slots AS (
       SELECT DISTINCT device_id, day_s, floor((extract(epoch FROM start_at) - day_s) / 900)::int + 1 AS slot_end FROM r
     )
     SELECT concat_ws(' ', s.device_id, s.day_s, array_agg(s.slot_end ORDER BY s.slot_end)::text, array_agg(c.uwh ORDER BY s.slot_end)::text,
                      array_agg(c.n ORDER BY s.slot_end)::text, array_agg(c.resets ORDER BY s.slot_end)::text) AS row
       FROM slots s CROSS JOIN LATERAL (
         SELECT sum(r.uwh) AS uwh, count(*)::int AS n, sum(r.reset)::int AS resets FROM r
          WHERE r.device_id = s.device_id AND r.day_s = s.day_s AND r.start_at < to_timestamp(s.day_s + s.slot_end * 900)
       ) c
      GROUP BY s.device_id, s.day_s ORDER BY s.device_id, s.day_s`,
    deviceIds,
  );
  return { stored: stored.map((r) => r.row), recomputed: recomputed.map((r) => r.row) };
}
