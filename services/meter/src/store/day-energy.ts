import { NO_ENERGY, type EdgePlace, type EdgeSums, type EnergyCount } from '../domain/day-energy';
import { ROLLUP_SPANS_S } from '../domain/rollup-plan';
import { arrayLiteral } from './array-param';
import type { MeterReader, MeterTx } from './prisma';
import { IN_ENERGY, MICRO_WH, spanStartOf } from './rollup-sql';

/**
 * The day energy rows (meter_day_energy, domain/day-energy.ts): per meter and UTC day, the
 * running energy sums after each quarter-hour slot that holds energy, kept as ingest adds
 * records, and the read of an energy answer's edges from them.
 *
 * A row lists the day's slots with energy in ascending order, as `slot_ends` (slot index + 1,
 * so the number of them at or below j is the number of such slots before the day's j-th quarter
 * hour: width_bucket), and the running sums after each. Records that arrive in order (the usual
 * case, also for a backlog) only append to a row or grow its last entry; a record for an earlier
 * slot marks the row stale, and it is recomputed from the day's slot rollups in the same
 * transaction.
 */

const SLOT_S = ROLLUP_SPANS_S[0];
const DAY_S = ROLLUP_SPANS_S[2];

const slotEndOf = (startAt: string): string => `(floor(extract(epoch FROM ${startAt}) / ${SLOT_S})::bigint % ${DAY_S / SLOT_S})::int + 1`;

/** The sums of day energy rows, in column order. */
const RUNNING = ['e_uwh', 'e_n', 'e_resets'] as const;

/** SQL: a day's row from its slots' running sums (slot_end, uwh, n, resets; grouped by device_id, day_s below it). */
const ROW_OF_RUNNING_SUMS =
  'SELECT device_id, day_s, array_agg(slot_end ORDER BY slot_end), array_agg(uwh ORDER BY slot_end), array_agg(n ORDER BY slot_end), array_agg(resets ORDER BY slot_end)';

/**
 * SQL: a data-modifying CTE body adding the records of `source` (a relation with device_id,
 * start_at, quarantined, energy_used_wh and energy_reset; every one newly stored) to the day
 * energy rows. A row whose last slot is at or before the new records' first slot is extended:
 * the new running sums are the row's total plus theirs. Any other row (a record for an earlier
 * slot) gets null arrays: stale, to be recomputed (refreshDayEnergySql) before the transaction
 * ends. Returns (device_id, day_s) of the stale rows.
 */
export function addToDayEnergySql(source: string): string {
  const last = 'cardinality(d.slot_ends)';
  const inOrder = `EXCLUDED.slot_ends[1] >= d.slot_ends[${last}]`;
  // Entries kept: all, or all but the last when the new records share its slot (it grows).
  const kept = `${last} - (EXCLUDED.slot_ends[1] = d.slot_ends[${last}])::int`;
  const extended = (c: string): string =>
    `${c} = CASE WHEN ${inOrder} THEN d.${c}[1:${kept}] || ARRAY(SELECT x + d.${c}[${last}] FROM unnest(EXCLUDED.${c}) WITH ORDINALITY AS u(x, o) ORDER BY o) END`;
  return `INSERT INTO meter_day_energy AS d (device_id, day_s, slot_ends, e_uwh, e_n, e_resets)
     ${ROW_OF_RUNNING_SUMS}
       FROM (
         SELECT device_id, day_s, slot_end, sum(uwh) OVER w AS uwh, (sum(n) OVER w)::int AS n, (sum(resets) OVER w)::int AS resets FROM (
           SELECT device_id, ${spanStartOf(DAY_S)} AS day_s, ${slotEndOf('start_at')} AS slot_end,
                  sum(${MICRO_WH}) AS uwh, count(*) AS n, count(*) FILTER (WHERE energy_reset) AS resets
             FROM ${source} WHERE start_at IS NOT NULL AND ${IN_ENERGY} GROUP BY 1, 2, 3
         ) slots WINDOW w AS (PARTITION BY device_id, day_s ORDER BY slot_end)
       ) running GROUP BY device_id, day_s
     ON CONFLICT (device_id, day_s) DO UPDATE SET
       slot_ends = CASE WHEN ${inOrder} THEN d.slot_ends[1:${kept}] || EXCLUDED.slot_ends END,
       ${RUNNING.map(extended).join(',\n       ')}
     RETURNING device_id, day_s, slot_ends IS NULL AS stale`;
}

/**
 * SQL: recomputes the day energy rows of the (device_id, day_s) pairs of `days` (a relation;
 * day_s the start of a UTC day in epoch seconds) from their slot rollups: one index range scan
 * per day, its slots with energy in order, running sums.
 */
export function refreshDayEnergySql(days: string): string {
  return `INSERT INTO meter_day_energy (device_id, day_s, slot_ends, e_uwh, e_n, e_resets)
     ${ROW_OF_RUNNING_SUMS}
       FROM (
         SELECT t.device_id, t.day_s, r.slot_end, sum(r.e_uwh) OVER w AS uwh, (sum(r.e_n) OVER w)::int AS n, (sum(r.e_resets) OVER w)::int AS resets
           FROM (SELECT DISTINCT device_id, day_s FROM ${days}) t
           CROSS JOIN LATERAL (
             SELECT ((start_s - t.day_s) / ${SLOT_S})::int + 1 AS slot_end, e_uwh, e_n, e_resets FROM meter_rollups
              WHERE device_id = t.device_id AND span = ${SLOT_S} AND start_s >= t.day_s AND start_s < t.day_s + ${DAY_S} AND e_n > 0
           ) r
         WINDOW w AS (PARTITION BY t.device_id, t.day_s ORDER BY r.slot_end)
       ) running GROUP BY device_id, day_s
     ON CONFLICT (device_id, day_s) DO UPDATE SET slot_ends = EXCLUDED.slot_ends, e_uwh = EXCLUDED.e_uwh, e_n = EXCLUDED.e_n, e_resets = EXCLUDED.e_resets`;
}

/** Recomputes these day energy rows from their slot rollups (the stale ones addToDayEnergySql returned). */
export async function refreshDayEnergy(tx: MeterTx, days: Array<{ deviceId: string; dayS: number }>): Promise<void> {
  if (days.length === 0) return;
  await tx.$executeRawUnsafe(
    refreshDayEnergySql('unnest($1::text[], $2::bigint[]) AS d(device_id, day_s)'),
    days.map((p) => p.deviceId),
    days.map((p) => p.dayS),
  );
}

/** A clear hides every record of the device: its day energy rows go with them. */
export async function dropDayEnergy(tx: MeterTx, deviceId: string): Promise<void> {
  await tx.$executeRawUnsafe('DELETE FROM meter_day_energy WHERE device_id = $1', deviceId);
}

/** The slot an edge asks for to read its day's whole total: the day's end (slot_ends are 1..96, every entry at or before it). */
const WHOLE_DAY = DAY_S / SLOT_S;

/**
 * Everything the edges of one energy answer need, in one statement: the day rows from the first
 * edge's day to the last edge's (one range scan), each joined with the slots asked of it (its
 * edges' slots and WHOLE_DAY for its total: the day's position in the range picks them from the
 * parameters; width_bucket finds the entry at or before each), and the raw records before each
 * edge that is not on a quarter hour. One flat list of the entries found ("day,slot,µWh,n,resets"
 * joined by ';'): a subquery per day cost Postgres more than the lookups themselves, and an
 * entry not listed (no energy before that slot, or no row for the day) is zero.
 */
export async function readEdgeSums(db: MeterReader, deviceId: string, edges: readonly EdgePlace[]): Promise<EdgeSums> {
  const firstDay = (edges[0] as EdgePlace).dayS;
  const lastDay = (edges.at(-1) as EdgePlace).dayS;
  // Per day of the range, the slots asked of it: its total, and its edges' (an edge on the day's
  // first instant has nothing of the day before it).
  const slotsByDay: number[][] = Array.from({ length: (lastDay - firstDay) / DAY_S + 1 }, () => [WHOLE_DAY]);
  for (const e of edges) {
    const slots = slotsByDay[(e.dayS - firstDay) / DAY_S] as number[];
    if (e.slots > 0 && !slots.includes(e.slots)) slots.push(e.slots);
  }
  const rawEdges = edges.flatMap((e, k) => (e.rawFromMs === null ? [] : [{ k, lo: e.rawFromMs, hi: e.ms }]));
  const rows = await db.$queryRawUnsafe<Array<{ entries: string | null; raw: string | null }>>(
    `/* energy at bucket edges */
     SELECT
       (SELECT string_agg(concat_ws(',', d.day_s, u.s, d.e_uwh[b], d.e_n[b], d.e_resets[b]), ';')
          FROM meter_day_energy d
          CROSS JOIN LATERAL unnest(string_to_array((SELECT $4::text::text[])[(d.day_s - $2::bigint) / ${DAY_S} + 1], ' ')::int[]) AS u(s)
          CROSS JOIN LATERAL (SELECT width_bucket(u.s, d.slot_ends) AS b) w
         WHERE d.device_id = $1 AND d.day_s >= $2::bigint AND d.day_s <= $3::bigint AND b > 0) AS entries,
       (SELECT string_agg(concat_ws(',', w.k, r.uwh, r.n, r.resets), ';')
          FROM unnest($5::text::int[], $6::text::timestamptz[], $7::text::timestamptz[]) AS w(k, lo, hi)
          CROSS JOIN LATERAL (
            SELECT sum(${MICRO_WH}) AS uwh, count(*) AS n, count(*) FILTER (WHERE energy_reset) AS resets
              FROM interval_records WHERE device_id = $1 AND start_at >= w.lo AND start_at < w.hi AND NOT cleared AND ${IN_ENERGY}
          ) r WHERE r.n > 0) AS raw`,
    deviceId,
    String(firstDay),
    String(lastDay),
    arrayLiteral(slotsByDay.map((slots) => `"${slots.join(' ')}"`)),
    arrayLiteral(rawEdges.map((e) => e.k)),
    arrayLiteral(rawEdges.map((e) => new Date(e.lo).toISOString())),
    arrayLiteral(rawEdges.map((e) => new Date(e.hi).toISOString())),
  );
  const row = rows[0];
  const keyOf = (dayS: number, slot: number): number => ((dayS - firstDay) / DAY_S) * (WHOLE_DAY + 1) + slot;
  const found = new Map<number, EnergyCount>();
  const days: EdgeSums['days'] = [];
  forEachEntry(row?.entries ?? null, 2, (dayS, slot, sums) => {
    found.set(keyOf(dayS, slot), sums);
    if (slot === WHOLE_DAY) days.push({ dayS, total: sums });
  });
  days.sort((a, b) => a.dayS - b.dayS);
  const inDay = edges.map((e) => found.get(keyOf(e.dayS, e.slots)) ?? NO_ENERGY);
  const raw = new Map<number, EnergyCount>();
  forEachEntry(row?.raw ?? null, 1, (k, _, sums) => raw.set(k, sums));
  return { days, inDay, raw };
}

/**
 * Calls `each` with the entries of a list as read: `keyCount` whole numbers (a day and a slot, or
 * an edge index; the second key is 0 when there is only one), then the sums; micro-watt-hours are
 * whole numbers (every record's are rounded to them). Read character by character: split into
 * strings first, the 2,000 entries of 80 days of hours took the meter about twice as long.
 */
export function forEachEntry(text: string | null, keyCount: 1 | 2, each: (key0: number, key1: number, sums: EnergyCount) => void): void {
  if (!text) return;
  const list = new ListReader(text);
  while (!list.done()) {
    const key0 = list.integer();
    const key1 = keyCount === 2 ? list.integer() : 0;
    const uwh = list.bigInteger();
    const n = list.integer();
    each(key0, key1, { uwh, n, resets: list.integer() });
  }
}

/** Whole numbers separated by one character each (`,` or `;`), read in turn. */
class ListReader {
  private i = 0;
  /** Where the text of the number read last begins (its sign included). */
  private from = 0;

  constructor(private readonly text: string) {}

  done(): boolean {
    return this.i >= this.text.length;
  }

  /** Exact at any size: through a number up to fifteen characters (exact below 2^53), else the digits. */
  bigInteger(): bigint {
    const value = this.integer();
    const to = this.i - 1;
    return to - this.from <= 15 ? BigInt(value) : BigInt(this.text.slice(this.from, to));
  }

  /** The number at the reading position; moves past it and its separator. */
  integer(): number {
    const { text } = this;
    let i = this.i;
    this.from = i;
    const negative = text.charCodeAt(i) === 0x2d;
    if (negative) i += 1;
    const digitsFrom = i;
    let value = 0;
    for (let c = text.charCodeAt(i); c >= 0x30 && c <= 0x39; c = text.charCodeAt(++i)) value = value * 10 + (c - 0x30);
    if (i === digitsFrom) throw new Error(`energy sums list is not whole numbers (at character ${i})`);
    this.i = i + 1;
    return negative ? -value : value;
  }
}
