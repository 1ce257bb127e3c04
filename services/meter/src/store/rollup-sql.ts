import { ROLLUP_SPANS_S } from '../domain/rollup-plan';

/**
 * The arithmetic of summary and energy answers in SQL, in one place: what a record contributes
 * to a rollup (meter_rollups, see prisma/schema.prisma), how rollups add up, and how ingest and
 * corrections write them. Raw records and rollups are summed with the same expressions, so an
 * answer read from rollups equals the one computed from the raw records. The migration that
 * created the table backfills it with the same statement.
 */

/** Letters of the summary's quantities in column names (v_avg, v_w, ...). */
export const QUANTITY_COLUMNS = ['v', 'i', 'p', 'f', 'pf'] as const;
export type QuantityColumn = (typeof QUANTITY_COLUMNS)[number];

/** A record carries a quantity: not quarantined, reads.n > 0, a positive duration_s, an average. */
const CARRIES = 'NOT quarantined AND reads_n > 0 AND duration_s > 0';
/** The power-factor load rule: highest power before CT correction reached 5 W. */
const LOAD = 'round((p_max * COALESCE(ct_turns, 1))::numeric, 6) >= 5';
const carries = (q: QuantityColumn): string => `${CARRIES} AND ${q}_avg IS NOT NULL${q === 'pf' ? ` AND ${LOAD}` : ''}`;

/** A record counts in energy answers: not quarantined, with the Wh it contributes. */
export const IN_ENERGY = 'NOT quarantined AND energy_used_wh IS NOT NULL';
/**
 * A record's Wh (6 decimals) as whole micro-watt-hours, exactly (through bigint where it fits;
 * numeric beyond, so no value can make a sum fail).
 */
export const MICRO_WH = 'CASE WHEN abs(energy_used_wh) < 9e12 THEN round(energy_used_wh * 1e6)::bigint::numeric ELSE round((energy_used_wh * 1e6)::numeric) END';

/** The columns of interval_records the rollups read. */
export const AGGREGATED_COLUMNS =
  'device_id, start_at, quarantined, duration_s, reads_n, v_avg, v_min, v_max, i_avg, i_min, i_max, p_avg, p_min, p_max, ' +
  'f_avg, f_min, f_max, pf_avg, pf_min, pf_max, ct_turns, energy_used_wh, energy_reset';

/** Rollup value columns, in table order. */
export const ROLLUP_VALUES = [
  'e_uwh',
  'e_n',
  'e_resets',
  'records',
  'quarantined',
  'seconds',
  ...QUANTITY_COLUMNS.flatMap((q) => [`${q}_w`, `${q}_s`, `${q}_lo`, `${q}_hi`, `${q}_n`]),
];
const isLow = (c: string): boolean => c.endsWith('_lo');
const isHigh = (c: string): boolean => c.endsWith('_hi');

const SLOT_S = ROLLUP_SPANS_S[0];

/** SQL: the start (epoch seconds) of the UTC-aligned span of `span` seconds that holds the instant `at`. */
export const spanStartOf = (span: number, at = 'start_at'): string => `floor(extract(epoch FROM ${at}) / ${span})::bigint * ${span}`;

/**
 * What each record contributes, computed once per record (the rules above are evaluated here,
 * not once per aggregate): null where it contributes nothing. `<q>_d` is its duration where it
 * carries quantity q. Also the start of its slot.
 */
const CONTRIBUTIONS = [
  'device_id',
  `${spanStartOf(SLOT_S)} AS start_s`,
  `CASE WHEN ${IN_ENERGY} THEN ${MICRO_WH} END AS e_uwh`,
  `CASE WHEN ${IN_ENERGY} THEN energy_reset::int END AS e_reset`,
  'quarantined::int AS quarantined',
  'CASE WHEN NOT quarantined THEN duration_s END AS seconds',
  ...QUANTITY_COLUMNS.flatMap((q) => [`CASE WHEN ${carries(q)} THEN duration_s END AS ${q}_d`, `${q}_avg, ${q}_min, ${q}_max`]),
].join(',\n         ');

/** Rollup values of contributions (a select list, ROLLUP_VALUES order; over none: zeros and nulls). */
const CONTRIBUTION_TOTALS = [
  'COALESCE(sum(e_uwh), 0) AS e_uwh',
  'count(e_uwh) AS e_n',
  'COALESCE(sum(e_reset), 0) AS e_resets',
  'count(*) AS records',
  'COALESCE(sum(quarantined), 0) AS quarantined',
  'COALESCE(sum(seconds), 0) AS seconds',
  ...QUANTITY_COLUMNS.flatMap((q) => [
    // Each average counts as whole millionths (it has 6 decimals) times its duration: exact.
    `COALESCE(sum(round(${q}_avg * 1e6)::bigint::numeric * ${q}_d), 0) AS ${q}_w`,
    `COALESCE(sum(${q}_d), 0) AS ${q}_s`,
    `min(${q}_min) FILTER (WHERE ${q}_d IS NOT NULL) AS ${q}_lo`,
    `max(${q}_max) FILTER (WHERE ${q}_d IS NOT NULL) AS ${q}_hi`,
    `count(${q}_d) AS ${q}_n`,
  ]),
].join(',\n       ');

/**
 * A query of the rollup values of the records of `source` (a relation with AGGREGATED_COLUMNS),
 * per slot (`device_id, start_s` first) or over all of them. Only records with a start count.
 */
export function recordTotals(source: string, per: 'slot' | 'all'): string {
  const contributions = `(SELECT ${CONTRIBUTIONS} FROM ${source} WHERE start_at IS NOT NULL OFFSET 0) contributions`;
  return per === 'slot'
    ? `SELECT device_id, start_s, ${CONTRIBUTION_TOTALS} FROM ${contributions} GROUP BY device_id, start_s`
    : `SELECT ${CONTRIBUTION_TOTALS} FROM ${contributions}`;
}

/** Rollup values added up over rollup-shaped rows (a select list, ROLLUP_VALUES order). */
export const ROLLUP_TOTALS = ROLLUP_VALUES.map((c) => `${isLow(c) ? 'min' : isHigh(c) ? 'max' : 'sum'}(${c}) AS ${c}`).join(', ');

/** ON CONFLICT update adding new records' values to a stored rollup. */
const ADD_TO_STORED = ROLLUP_VALUES.map((c) => {
  const stored = `meter_rollups.${c}`;
  if (isLow(c)) return `${c} = LEAST(${stored}, EXCLUDED.${c})`;
  if (isHigh(c)) return `${c} = GREATEST(${stored}, EXCLUDED.${c})`;
  return `${c} = ${stored} + EXCLUDED.${c}`;
}).join(', ');

/** ON CONFLICT update replacing a stored rollup by one recomputed from every record. */
const REPLACE_STORED = ROLLUP_VALUES.map((c) => `${c} = EXCLUDED.${c}`).join(', ');

/** The spans above the slot, as a relation `spans(span)`. */
const COARSER_SPANS = `(VALUES ${ROLLUP_SPANS_S.slice(1)
  .map((s) => `(${s})`)
  .join(', ')}) AS spans(span)`;

/**
 * INSERT adding the records of `source` (a relation with AGGREGATED_COLUMNS, none cleared) to
 * the rollups of every span, as one grouped upsert for a whole batch: the records are summed per
 * slot, and the slots per hour and per day. `mode` 'add' for records new to the rollups,
 * 'replace' when `source` holds every record of the spans it touches.
 */
export function upsertRollups(source: string, mode: 'add' | 'replace'): string {
  return `INSERT INTO meter_rollups (device_id, span, start_s, ${ROLLUP_VALUES.join(', ')})
     WITH slots AS (${recordTotals(source, 'slot')})
     SELECT device_id, ${SLOT_S}, start_s, ${ROLLUP_VALUES.join(', ')} FROM slots
     UNION ALL
     SELECT device_id, spans.span, start_s - (start_s % spans.span + spans.span) % spans.span AS span_start, ${ROLLUP_TOTALS}
       FROM slots CROSS JOIN ${COARSER_SPANS} GROUP BY device_id, spans.span, span_start
     ON CONFLICT (device_id, span, start_s) DO UPDATE SET ${mode === 'add' ? ADD_TO_STORED : REPLACE_STORED}`;
}
