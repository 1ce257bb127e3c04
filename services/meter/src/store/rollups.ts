import { bucketEdges, bucketsFromEdges, type BucketEnergy } from '../domain/day-energy';
import type { Window } from '../domain/query';
import { ROLLUP_SPANS_S, rollupReadPlan, type RollupReadPlan } from '../domain/rollup-plan';
import { QUANTITIES, type Quantity, type QuantityAcc } from '../domain/summary';
import { arrayLiteral } from './array-param';
import { dropDayEnergy, readEdgeSums, refreshDayEnergySql } from './day-energy';
import type { MeterReader, MeterTx } from './prisma';
import { AGGREGATED_COLUMNS, QUANTITY_COLUMNS, recordTotals, ROLLUP_TOTALS, ROLLUP_VALUES, spanStartOf, upsertRollups } from './rollup-sql';

/**
 * Summary sums read from the rollups (meter_rollups), energy sums from the day energy rows
 * (store/day-energy.ts), and the corrections that keep both equal to the raw records. Ingest adds
 * each batch's new records to them in its own insert statement (store/ingest.ts); a clear removes
 * its device's; a stored record whose flags change has its days recomputed from the raw records.
 */

/** Recomputes, from the raw records, every rollup and day energy row of the UTC days holding these records' starts. */
export async function recomputeRollups(tx: MeterTx, arrivalSeqs: bigint[]): Promise<void> {
  if (arrivalSeqs.length === 0) return;
  const day = ROLLUP_SPANS_S[2];
  const days = `(SELECT DISTINCT device_id, ${spanStartOf(day)} AS day_s
       FROM interval_records WHERE arrival_seq = ANY($1::bigint[]) AND start_at IS NOT NULL AND NOT cleared) d`;
  await tx.$executeRawUnsafe(
    `WITH affected AS (
       SELECT ${AGGREGATED_COLUMNS.split(', ').map((c) => `r.${c}`).join(', ')}
         FROM ${days} JOIN interval_records r
           ON r.device_id = d.device_id AND r.start_at >= to_timestamp(d.day_s) AND r.start_at < to_timestamp(d.day_s + ${day})
        WHERE NOT r.cleared
     )
     ${upsertRollups('affected', 'replace')}`,
    arrivalSeqs,
  );
  await tx.$executeRawUnsafe(refreshDayEnergySql(days), arrivalSeqs);
}

/** A clear hides every record of the device: its rollups and day energy rows go with them. */
export async function dropRollups(tx: MeterTx, deviceId: string): Promise<void> {
  await tx.$executeRawUnsafe('DELETE FROM meter_rollups WHERE device_id = $1', deviceId);
  await dropDayEnergy(tx, deviceId);
}

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
  /** The buckets with energy, by ascending index. */
  buckets: BucketEnergy[];
  total: EnergySum;
}

/**
 * Energy per bucket and over the whole window: boundaries are the buckets' start instants (ms)
 * followed by the last end. Each bucket is the difference of the running sums at its edges
 * (domain/day-energy.ts), read from one row per UTC day the window touches (store/day-energy.ts)
 * and the raw records before an edge off the quarter hour. Sums are whole micro-watt-hours.
 */
export async function energyByBucket(db: MeterReader, deviceId: string, window: Window, boundariesMs: number[]): Promise<BucketSums> {
  const edges = bucketEdges(window.start.getTime(), window.end.getTime(), boundariesMs);
  const { buckets, total } = bucketsFromEdges(edges, await readEdgeSums(db, deviceId, edges));
  return {
    buckets,
    total: { energyWh: total.n > 0 ? Number(total.uwh) / 1e6 : null, intervals: total.n, resets: total.resets },
  };
}
