import { NO_ENERGY, type EdgePlace, type EdgeSums, type EnergyCount } from '../domain/day-energy';
import { ROLLUP_SPANS_S } from '../domain/rollup-plan';
import { arrayLiteral } from './array-param';
import type { MeterReader, MeterTx } from './prisma';
import { IN_ENERGY, MICRO_WH } from './rollup-sql';

/**
 * The day energy rows (meter_day_energy, domain/day-energy.ts): running energy sums at the 97
 * quarter-hour boundaries of each meter's UTC day, recomputed from that day's slot rollups
 * whenever they change, and the read of an energy answer's edges from them.
 */

const SLOT_S = ROLLUP_SPANS_S[0];
const DAY_S = ROLLUP_SPANS_S[2];

/**
 * SQL: recomputes the day energy rows of the (device_id, day_s) pairs of `days` (a relation;
 * day_s the start of a UTC day in epoch seconds) from their slot rollups. Element j + 1 of each
 * array sums the slots before the day's j-th quarter hour. Each day's slots are one range scan.
 */
export function refreshDayEnergySql(days: string): string {
  return `INSERT INTO meter_day_energy (device_id, day_s, e_uwh, e_n, e_resets)
     WITH touched AS (SELECT DISTINCT device_id, day_s FROM ${days}),
     slots AS (
       SELECT t.device_id, t.day_s, (r.start_s - t.day_s) / ${SLOT_S} + 1 AS j, r.e_uwh, r.e_n, r.e_resets
         FROM touched t JOIN meter_rollups r
           ON r.device_id = t.device_id AND r.span = ${SLOT_S} AND r.start_s >= t.day_s AND r.start_s < t.day_s + ${DAY_S}
     )
     SELECT device_id, day_s, array_agg(uwh ORDER BY j), array_agg(n ORDER BY j), array_agg(resets ORDER BY j) FROM (
       SELECT t.device_id, t.day_s, g.j,
              sum(COALESCE(s.e_uwh, 0)) OVER w AS uwh, (sum(COALESCE(s.e_n, 0)) OVER w)::int AS n, (sum(COALESCE(s.e_resets, 0)) OVER w)::int AS resets
         FROM touched t CROSS JOIN generate_series(0, ${DAY_S / SLOT_S}) AS g(j)
         LEFT JOIN slots s ON s.device_id = t.device_id AND s.day_s = t.day_s AND s.j = g.j
       WINDOW w AS (PARTITION BY t.device_id, t.day_s ORDER BY g.j)
     ) running GROUP BY device_id, day_s
     ON CONFLICT (device_id, day_s) DO UPDATE SET e_uwh = EXCLUDED.e_uwh, e_n = EXCLUDED.e_n, e_resets = EXCLUDED.e_resets`;
}

/** Recomputes the day energy rows of the UTC days of these record starts. */
export async function refreshDayEnergy(tx: MeterTx, starts: Array<{ deviceId: string; startAt: Date | null }>): Promise<void> {
  const days = new Map<string, { deviceId: string; dayS: number }>();
  for (const { deviceId, startAt } of starts) {
    if (!startAt) continue;
    const dayS = Math.floor(startAt.getTime() / 1000 / DAY_S) * DAY_S;
    days.set(`${deviceId} ${dayS}`, { deviceId, dayS });
  }
  if (days.size === 0) return;
  const pairs = [...days.values()];
  await tx.$executeRawUnsafe(
    refreshDayEnergySql('unnest($1::text[], $2::bigint[]) AS d(device_id, day_s)'),
    pairs.map((p) => p.deviceId),
    pairs.map((p) => p.dayS),
  );
}

/** A clear hides every record of the device: its day energy rows go with them. */
export async function dropDayEnergy(tx: MeterTx, deviceId: string): Promise<void> {
  await tx.$executeRawUnsafe('DELETE FROM meter_day_energy WHERE device_id = $1', deviceId);
}

/** JSON of energy sums, micro-watt-hours as a string (exact past 2^53). */
const sumsJson = (uwh: string, n: string, resets: string): string => `concat_ws(',', '["' || ${uwh} || '"', ${n}, ${resets} || ']')`;

/**
 * Everything the edges of one energy answer need, in one statement: the day rows from the first
 * edge's day to the last edge's (one range scan; each row gives its total and its running sums
 * at the slots of the edges on that day, found by the day's position in the range), and the raw
 * records before each edge that is not on a quarter hour. Each part comes back as one JSON text:
 * thousands of rows cost more to map than to compute.
 */
export async function readEdgeSums(db: MeterReader, deviceId: string, edges: readonly EdgePlace[]): Promise<EdgeSums> {
  const firstDay = (edges[0] as EdgePlace).dayS;
  const lastDay = (edges.at(-1) as EdgePlace).dayS;
  // Per day of the range, the slots its edges fall on (a day without edges: none).
  const slotsByDay: number[][] = Array.from({ length: (lastDay - firstDay) / DAY_S + 1 }, () => []);
  for (const e of edges) {
    const slots = slotsByDay[(e.dayS - firstDay) / DAY_S] as number[];
    if (!slots.includes(e.slots)) slots.push(e.slots);
  }
  const rawEdges = edges.flatMap((e, k) => (e.rawFromMs === null ? [] : [{ k, lo: e.rawFromMs, hi: e.ms }]));
  const rows = await db.$queryRawUnsafe<Array<{ days: string | null; raw: string | null }>>(
    `/* energy at bucket edges */
     SELECT
       (SELECT concat('[', string_agg(concat('[', d.day_s, ',', ${sumsJson('d.e_uwh[97]', 'd.e_n[97]', 'd.e_resets[97]')}, ',[', (
                 SELECT string_agg(${sumsJson('d.e_uwh[s + 1]', 'd.e_n[s + 1]', 'd.e_resets[s + 1]')}, ',' ORDER BY o)
                   FROM unnest(string_to_array((SELECT $4::text::text[])[(d.day_s - $2::bigint) / ${DAY_S} + 1], ' ')::int[]) WITH ORDINALITY AS u(s, o)
               ), ']]'), ',' ORDER BY d.day_s), ']')
          FROM meter_day_energy d WHERE d.device_id = $1 AND d.day_s >= $2::bigint AND d.day_s <= $3::bigint) AS days,
       (SELECT concat('[', string_agg(concat('[', w.k, ',', ${sumsJson('r.uwh', 'r.n', 'r.resets')}, ']'), ','), ']')
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
  const days: EdgeSums['days'] = [];
  const atSlots = new Map<number, EnergyCount[]>();
  for (const [dayS, total, sums] of JSON.parse(row?.days ?? '[]') as Array<[number, Sums, Sums[]]>) {
    days.push({ dayS, total: energyCount(total) });
    atSlots.set(dayS, sums.map(energyCount));
  }
  const inDay = edges.map((e) => {
    const sums = atSlots.get(e.dayS);
    return sums ? (sums[(slotsByDay[(e.dayS - firstDay) / DAY_S] as number[]).indexOf(e.slots)] as EnergyCount) : NO_ENERGY;
  });
  const raw = new Map((JSON.parse(row?.raw ?? '[]') as Array<[number, Sums]>).map(([k, sums]) => [k, energyCount(sums)]));
  return { days, inDay, raw };
}

/** Energy sums as read: micro-watt-hours as a string, then records and resets. */
type Sums = [string, number, number];

/** Sums as read: micro-watt-hours are whole numbers (every record's are rounded to them). */
function energyCount([uwh, n, resets]: Sums): EnergyCount {
  return { uwh: BigInt(uwh), n, resets };
}
