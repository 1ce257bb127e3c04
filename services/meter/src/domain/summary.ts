import { round6 } from './record';

/**
 * The summary's arithmetic. A record carries a quantity when it is not quarantined, has
 * reads.n > 0, an average for it and a positive duration_s. avg is duration-weighted
 * (sum(avg x duration_s) / sum(duration_s)); min and max are the extremes of the records'
 * min and max. power_factor counts only records with a load: the highest power before CT
 * correction (power_w.max x ct_turns) reached 5 W.
 */

export const QUANTITIES = ['voltage_v', 'current_a', 'power_w', 'frequency_hz', 'power_factor'] as const;
export type Quantity = (typeof QUANTITIES)[number];

/** Load threshold of the power-factor rule, in W before CT correction. */
export const PF_LOAD_THRESHOLD_W = 5;

export interface SummaryRow {
  quarantined: boolean;
  durationS: number | null;
  readsN: number | null;
  ctTurns: number | null;
  stats: Record<Quantity, { avg: number; min: number; max: number } | null>;
}

/** Running sums of one quantity; the store computes the same sums in SQL. */
export interface QuantityAcc {
  weighted: number;
  seconds: number;
  min: number | null;
  max: number | null;
  intervals: number;
}

export interface QuantitySummary {
  avg: number;
  min: number;
  max: number;
  intervals: number;
  seconds: number;
}

export function hasLoad(pMaxCorrected: number | null, ctTurns: number | null): boolean {
  if (pMaxCorrected === null) return false;
  return round6(pMaxCorrected * (ctTurns ?? 1)) >= PF_LOAD_THRESHOLD_W;
}

/** Whether a record carries the quantity (the rule above). */
export function carries(row: SummaryRow, q: Quantity): boolean {
  if (row.quarantined || row.readsN === null || row.readsN <= 0 || row.durationS === null || row.durationS <= 0) return false;
  if (!row.stats[q]) return false;
  if (q === 'power_factor') return hasLoad(row.stats.power_w?.max ?? null, row.ctTurns);
  return true;
}

export function emptyAcc(): QuantityAcc {
  return { weighted: 0, seconds: 0, min: null, max: null, intervals: 0 };
}

export function finishQuantity(acc: QuantityAcc): QuantitySummary | null {
  if (acc.intervals === 0 || acc.seconds <= 0 || acc.min === null || acc.max === null) return null;
  return { avg: round6(acc.weighted / acc.seconds), min: round6(acc.min), max: round6(acc.max), intervals: acc.intervals, seconds: acc.seconds };
}

/** The summary of rows in memory (the reference the SQL aggregation is tested against). */
export function summarizeRows(rows: SummaryRow[]): Record<Quantity, QuantitySummary | null> & { coverage: { records: number; quarantined: number; seconds: number } } {
  const accs = Object.fromEntries(QUANTITIES.map((q) => [q, emptyAcc()])) as Record<Quantity, QuantityAcc>;
  let quarantined = 0;
  let seconds = 0;
  for (const row of rows) {
    if (row.quarantined) quarantined++;
    else seconds += row.durationS ?? 0;
    for (const q of QUANTITIES) {
      if (!carries(row, q)) continue;
      const s = row.stats[q] as { avg: number; min: number; max: number };
      const acc = accs[q];
      acc.weighted += s.avg * (row.durationS as number);
      acc.seconds += row.durationS as number;
      acc.min = acc.min === null ? s.min : Math.min(acc.min, s.min);
      acc.max = acc.max === null ? s.max : Math.max(acc.max, s.max);
      acc.intervals++;
    }
  }
  const out = Object.fromEntries(QUANTITIES.map((q) => [q, finishQuantity(accs[q])])) as Record<Quantity, QuantitySummary | null>;
  return { ...out, coverage: { records: rows.length, quarantined, seconds } };
}
