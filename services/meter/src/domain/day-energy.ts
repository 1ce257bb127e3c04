/**
 * Energy buckets as differences of running sums. Pure.
 *
 * The store keeps, per meter and UTC day, the running energy sums after each quarter-hour slot
 * that holds energy (MeterDayEnergy). The running sum at any instant t, counted from the first
 * day the window touches, is then: the whole days before t's day, plus t's day up to the quarter
 * hour at or before t, plus the raw records that start between that quarter hour and t (only
 * when t is not on a quarter hour: a window edge at any millisecond, or a zone boundary before
 * 1972). A bucket is the running sum at its end minus the one at its start. Every sum is in
 * whole micro-watt-hours and record counts, so the differences are exact (bigint).
 */

const SLOT_MS = 900_000;
const DAY_MS = 86_400_000;

/** Where a bucket edge falls: its UTC day, the day's whole slots before it, and the part of a slot before it. */
export interface EdgePlace {
  /** Start of the UTC day in epoch seconds. */
  dayS: number;
  /** Whole quarter hours of that day before the edge (0..95). */
  slots: number;
  /** Raw records starting in [rawFromMs, the edge) count too; null when the edge is on a quarter hour. */
  rawFromMs: number | null;
  ms: number;
}

/**
 * The edges of an energy answer: the window's start, the bucket boundaries strictly inside it,
 * and its end. Boundaries: the buckets' starts then the last end; the first bucket holds the
 * start, so edge k and k + 1 bound bucket k.
 */
export function bucketEdges(startMs: number, endMs: number, boundariesMs: readonly number[]): EdgePlace[] {
  const edges = [startMs, ...boundariesMs.filter((b) => b > startMs && b < endMs), endMs];
  return edges.map((ms) => {
    const dayMs = Math.floor(ms / DAY_MS) * DAY_MS;
    const slotMs = Math.floor(ms / SLOT_MS) * SLOT_MS;
    return { dayS: dayMs / 1000, slots: (slotMs - dayMs) / SLOT_MS, rawFromMs: slotMs === ms ? null : slotMs, ms };
  });
}

/** Energy sums: whole micro-watt-hours, records with a counter reading, those flagged energy_reset. */
export interface EnergyCount {
  uwh: bigint;
  n: number;
  resets: number;
}

export const NO_ENERGY: EnergyCount = { uwh: 0n, n: 0, resets: 0 };

const plus = (a: EnergyCount, b: EnergyCount): EnergyCount => ({ uwh: a.uwh + b.uwh, n: a.n + b.n, resets: a.resets + b.resets });
const minus = (a: EnergyCount, b: EnergyCount): EnergyCount => ({ uwh: a.uwh - b.uwh, n: a.n - b.n, resets: a.resets - b.resets });

/** What the store read for the edges of one answer. */
export interface EdgeSums {
  /** Whole-day totals of the days with energy from the first edge's day on, by day start (s), ascending; an edge counts those before its day. */
  days: Array<{ dayS: number; total: EnergyCount }>;
  /** Per edge, its day's running sum at its slot (NO_ENERGY where the day has no row). */
  inDay: EnergyCount[];
  /** Per edge index, the raw records between its quarter hour and it (absent: none). */
  raw: Map<number, EnergyCount>;
}

export interface BucketEnergy {
  index: number;
  energy: EnergyCount;
}

/** Bucket k = running sum at edge k + 1 minus at edge k; buckets without a record are left out. */
export function bucketsFromEdges(edges: readonly EdgePlace[], sums: EdgeSums): { buckets: BucketEnergy[]; total: EnergyCount } {
  const running: EnergyCount[] = [];
  let wholeDays = NO_ENERGY;
  let next = 0;
  edges.forEach((edge, k) => {
    for (; next < sums.days.length && (sums.days[next] as { dayS: number }).dayS < edge.dayS; next++) {
      wholeDays = plus(wholeDays, (sums.days[next] as { total: EnergyCount }).total);
    }
    running.push(plus(plus(wholeDays, sums.inDay[k] ?? NO_ENERGY), sums.raw.get(k) ?? NO_ENERGY));
  });
  const buckets: BucketEnergy[] = [];
  for (let k = 0; k + 1 < running.length; k++) {
    const energy = minus(running[k + 1] as EnergyCount, running[k] as EnergyCount);
    if (energy.n > 0) buckets.push({ index: k, energy });
  }
  const total = running.length > 1 ? minus(running.at(-1) as EnergyCount, running[0] as EnergyCount) : NO_ENERGY;
  return { buckets, total };
}
