import type { BucketWidth } from '../domain/energy';
import type { Window } from '../domain/query';
import { energyReadPlan, ROLLUP_SPANS_S, rollupReadPlan, type RollupReadPlan } from '../domain/rollup-plan';
import { QUANTITIES, type Quantity, type QuantityAcc } from '../domain/summary';
import type { MeterReader, MeterTx } from './prisma';
import { AGGREGATED_COLUMNS, IN_ENERGY, MICRO_WH, QUANTITY_COLUMNS, recordTotals, ROLLUP_TOTALS, ROLLUP_VALUES, upsertRollups } from './rollup-sql';

/**
 * Summary and energy sums read from the rollups (meter_rollups), and the corrections that keep
 * the rollups equal to the raw records. Ingest adds each batch's new records to them in its own
 * insert statement (store/ingest.ts); a clear removes its device's; a stored record whose flags
 * change has its spans recomputed from the raw records.
 */

/** Recomputes, from the raw records, every rollup of the UTC days holding these records' starts. */
export async function recomputeRollups(tx: MeterTx, arrivalSeqs: bigint[]): Promise<void> {
  if (arrivalSeqs.length === 0) return;
  const day = ROLLUP_SPANS_S[ROLLUP_SPANS_S.length - 1];
  await tx.$executeRawUnsafe(
    `WITH days AS (
       SELECT DISTINCT device_id, floor(extract(epoch FROM start_at) / ${day})::bigint * ${day} AS day
         FROM interval_records WHERE arrival_seq = ANY($1::bigint[]) AND start_at IS NOT NULL AND NOT cleared
     ), affected AS (
       SELECT ${AGGREGATED_COLUMNS.split(', ').map((c) => `r.${c}`).join(', ')}
         FROM days d JOIN interval_records r
           ON r.device_id = d.device_id AND r.start_at >= to_timestamp(d.day) AND r.start_at < to_timestamp(d.day + ${day})
        WHERE NOT r.cleared
     )
     ${upsertRollups('affected', 'replace')}`,
    arrivalSeqs,
  );
}

/** A clear hides every record of the device: its rollups go with them. */
export async function dropRollups(tx: MeterTx, deviceId: string): Promise<void> {
  await tx.$executeRawUnsafe('DELETE FROM meter_rollups WHERE device_id = $1', deviceId);
}

/**
 * An array parameter as a Postgres array literal: passed as one text (cast in SQL), because the
 * client spends milliseconds serializing a JS array of a couple of thousand numbers. The cast is
 * not constant to the planner: where a row uses the array, read it once, `(SELECT $n::text::...)`.
 */
const arrayLiteral = (values: Array<number | string>): string => `{${values.join(',')}}`;

/** Parameters $2.. of a read: the rollup ranges (span, lo, hi) and the raw ranges (lo, hi), as array literals. */
function planParams(plan: RollupReadPlan): string[] {
  return [
    arrayLiteral(plan.rollups.map((r) => r.span)),
    arrayLiteral(plan.rollups.map((r) => r.lo)),
    arrayLiteral(plan.rollups.map((r) => r.hi)),
    arrayLiteral(plan.raw.map((r) => new Date(r.lo).toISOString())),
    arrayLiteral(plan.raw.map((r) => new Date(r.hi).toISOString())),
  ];
}

/**
 * Rollup rows in the plan's ranges (alias r), and stored, not cleared records in its raw ranges
 * (alias x), with the columns named. Each range is its own index scan: OFFSET 0 keeps the
 * planner from turning hundreds of ranges into a hash join over every row of the meter (and
 * stops it from dropping unused columns, hence the lists).
 */
const rollupRows = (columns: string): string => `unnest($2::text::int[], $3::text::bigint[], $4::text::bigint[]) AS g(span, lo, hi) CROSS JOIN LATERAL (
      SELECT ${columns} FROM meter_rollups WHERE device_id = $1 AND span = g.span AND start_s >= g.lo AND start_s < g.hi OFFSET 0) r`;
const rawRows = (columns: string): string => `unnest($5::text::timestamptz[], $6::text::timestamptz[]) AS w(lo, hi) CROSS JOIN LATERAL (
      SELECT ${columns} FROM interval_records WHERE device_id = $1 AND start_at >= w.lo AND start_at < w.hi AND NOT cleared OFFSET 0) x`;

export interface EnergySum {
  energyWh: number | null;
  intervals: number;
  resets: number;
}

export interface SummarySums {
  records: number;
  quarantined: number;
  seconds: number;
  quantities: Record<Quantity, QuantityAcc>;
  energy: EnergySum;
}

const num = (x: unknown): number => (x === null || x === undefined ? 0 : Number(x));
const numOrNull = (x: unknown): number | null => (x === null || x === undefined ? null : Number(x));
/** Whole micro-watt-hours (as text, exact) to Wh. */
const wattHours = (uwh: unknown): number | null => (uwh === null || uwh === undefined ? null : Number(uwh) / 1e6);

/**
 * The summary's sums (records, quantities and energy) over the records that start in the
 * window, from the rollups and the raw records of the window's edges.
 */
export async function summarySums(db: MeterReader, deviceId: string, window: Window): Promise<SummarySums> {
  const plan = rollupReadPlan(window.start.getTime(), window.end.getTime());
  const rows = await db.$queryRawUnsafe<Array<Record<string, unknown>>>(
    `SELECT ${ROLLUP_VALUES.map((c) => `${c}::text AS ${c}`).join(', ')} FROM (
       SELECT ${ROLLUP_TOTALS} FROM (
         SELECT ${ROLLUP_VALUES.map((c) => `r.${c}`).join(', ')} FROM ${rollupRows(ROLLUP_VALUES.join(', '))}
         UNION ALL
         ${recordTotals(rawRows(AGGREGATED_COLUMNS), 'all')}
       ) parts
     ) total`,
    deviceId,
    ...planParams(plan),
  );
  const r = rows[0] ?? {};
  const quantities = Object.fromEntries(
    QUANTITIES.map((q, k) => {
      const c = QUANTITY_COLUMNS[k] as string;
      const weighted = num(r[`${c}_w`]) / 1e6;
      return [q, { weighted, seconds: num(r[`${c}_s`]), min: numOrNull(r[`${c}_lo`]), max: numOrNull(r[`${c}_hi`]), intervals: num(r[`${c}_n`]) }];
    }),
  ) as Record<Quantity, QuantityAcc>;
  const energy = { energyWh: num(r.e_n) > 0 ? wattHours(r.e_uwh) : null, intervals: num(r.e_n), resets: num(r.e_resets) };
  return { records: num(r.records), quarantined: num(r.quarantined), seconds: num(r.seconds), quantities, energy };
}

export interface BucketSums {
  buckets: Array<{ index: number; energyWh: number; intervals: number; resets: number }>;
  total: EnergySum;
}

/** The leading comment of each width's energy statement (see energyByBucket). */
const ENERGY_STATEMENT: Record<BucketWidth, string> = { day: '/* energy per day */', hour: '/* energy per hour */' };

/**
 * Energy per bucket and over the whole window in one query: boundaries are the buckets' start
 * instants (ms) followed by the last end. Rollup rows and raw records of the plan lie inside
 * one bucket each and are placed by their start; the plan's adjustments (coarser rows, added
 * or subtracted) name their bucket. Sums are whole micro-watt-hours, so they do not depend on
 * how the window was split. The buckets come back as one JSON array ([index, µWh, records,
 * resets] each): thousands of rows cost more to map than to compute.
 *
 * Day and hour reads are two prepared statements (the leading comment names the width). Postgres
 * settles, on each connection, whether a statement is planned once for every value or anew for
 * each call from the statement's first five runs. A year of day buckets settles on the plan for
 * every value, which makes a read of hour buckets about twice as slow as its own statement's
 * plan (measured in bench/README.md, meter).
 */
export async function energyByBucket(db: MeterReader, deviceId: string, window: Window, boundariesMs: number[], width: BucketWidth): Promise<BucketSums> {
  const plan = energyReadPlan(window.start.getTime(), window.end.getTime(), boundariesMs);
  const { adjustments } = plan;
  const rows = await db.$queryRawUnsafe<Array<{ buckets: string; uwh: string | null; n: string | bigint | null; resets: string | bigint | null }>>(
    `${ENERGY_STATEMENT[width]}
     SELECT concat('[', string_agg(concat_ws(',', '[' || b, uwh, n, resets || ']'), ',') FILTER (WHERE b IS NOT NULL), ']') AS buckets,
            min(uwh) FILTER (WHERE b IS NULL) AS uwh, min(n) FILTER (WHERE b IS NULL) AS n, min(resets) FILTER (WHERE b IS NULL) AS resets
       FROM (
         SELECT b, sum(uwh)::text AS uwh, sum(n)::bigint AS n, sum(resets)::bigint AS resets FROM (
           SELECT width_bucket(r.start_s * 1000, (SELECT $7::text::bigint[])) - 1 AS b, r.e_uwh AS uwh, r.e_n AS n, r.e_resets AS resets
             FROM ${rollupRows('start_s, e_uwh, e_n, e_resets')} WHERE r.e_n > 0
           UNION ALL
           SELECT a.bucket, a.sign * r.e_uwh, a.sign * r.e_n, a.sign * r.e_resets
             FROM unnest($8::text::int[], $9::text::bigint[], $10::text::bigint[], $11::text::int[], $12::text::int[]) AS a(span, lo, hi, sign, bucket)
             CROSS JOIN LATERAL (SELECT e_uwh, e_n, e_resets FROM meter_rollups WHERE device_id = $1 AND span = a.span AND start_s >= a.lo AND start_s < a.hi OFFSET 0) r
            WHERE r.e_n > 0
           UNION ALL
           SELECT width_bucket((extract(epoch FROM start_at) * 1000)::bigint, (SELECT $7::text::bigint[])) - 1, ${MICRO_WH}, 1, energy_reset::int
             FROM ${rawRows(AGGREGATED_COLUMNS)} WHERE ${IN_ENERGY}
         ) parts GROUP BY GROUPING SETS ((b), ())
       ) sums`,
    deviceId,
    ...planParams(plan),
    arrayLiteral(boundariesMs),
    arrayLiteral(adjustments.map((a) => a.span)),
    arrayLiteral(adjustments.map((a) => a.lo)),
    arrayLiteral(adjustments.map((a) => a.hi)),
    arrayLiteral(adjustments.map((a) => a.sign)),
    arrayLiteral(adjustments.map((a) => a.bucket)),
  );
  const r = rows[0];
  const n = Number(r?.n ?? 0);
  const total: EnergySum = { energyWh: n > 0 ? wattHours(r?.uwh) : null, intervals: n, resets: Number(r?.resets ?? 0) };
  const buckets = (JSON.parse(r?.buckets ?? '[]') as Array<[number, number, number, number]>).map(([index, uwh, intervals, resets]) => ({
    index,
    energyWh: uwh / 1e6,
    intervals,
    resets,
  }));
  return { buckets, total };
}
