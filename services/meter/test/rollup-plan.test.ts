/**
 * The pure parts of rollup reads: which rollup rows and raw ranges make up a window
 * (domain/rollup-plan.ts), energy buckets from running day sums (domain/day-energy.ts), zone offsets from few lookups (domain/zone-offsets.ts), buckets
 * built on them, and ISO times written without a Date each.
 */
import { DateTime, IANAZone } from 'luxon';
import { bucketLabel, bucketsFor } from '../src/domain/energy';
import { isoByteWriter, isoOffset } from '../src/domain/iso-time';
import { bucketEdges, bucketsFromEdges, NO_ENERGY, type EdgePlace, type EdgeSums, type EnergyCount } from '../src/domain/day-energy';
import { ROLLUP_SPANS_S, rollupReadPlan, type RollupReadPlan } from '../src/domain/rollup-plan';
import { offsetMinutes, offsetsOf } from '../src/domain/zone-offsets';
import { seededRandom as random } from './seeded-random';

/** Every piece of the plan as [lo, hi) in ms, with what it is. */
function pieces(plan: RollupReadPlan): Array<{ lo: number; hi: number; span: number | null }> {
  return [
    ...plan.rollups.flatMap((r) => {
      const rows: Array<{ lo: number; hi: number; span: number }> = [];
      for (let t = r.lo; t < r.hi; t += r.span) rows.push({ lo: t * 1000, hi: (t + r.span) * 1000, span: r.span });
      return rows;
    }),
    ...plan.raw.map((r) => ({ ...r, span: null })),
  ].sort((a, b) => a.lo - b.lo);
}

describe('rollup read plan', () => {
  const H = 3_600_000;
  const D = 86_400_000;

  it('reads whole hours and days where they fit, slots beside them, raw records at unaligned edges', () => {
    const start = Date.parse('2026-03-01T22:10:00Z');
    const end = Date.parse('2026-03-04T01:20:30Z');
    const plan = rollupReadPlan(start, end);
    expect(plan.raw).toEqual([
      { lo: start, hi: Date.parse('2026-03-01T22:15:00Z') },
      { lo: Date.parse('2026-03-04T01:15:00Z'), hi: end },
    ]);
    const s = (iso: string) => Date.parse(iso) / 1000;
    expect(plan.rollups).toEqual([
      { span: 900, lo: s('2026-03-01T22:15:00Z'), hi: s('2026-03-01T23:00:00Z') },
      { span: 900, lo: s('2026-03-04T01:00:00Z'), hi: s('2026-03-04T01:15:00Z') },
      { span: 3600, lo: s('2026-03-01T23:00:00Z'), hi: s('2026-03-02T00:00:00Z') },
      { span: 3600, lo: s('2026-03-04T00:00:00Z'), hi: s('2026-03-04T01:00:00Z') },
      { span: 86_400, lo: s('2026-03-02T00:00:00Z'), hi: s('2026-03-04T00:00:00Z') },
    ]);
  });

  it.each([1, 2, 3, 4, 5])('covers random windows exactly once with aligned rows (seed %i)', (seed) => {
    const rnd = random(seed);
    for (let n = 0; n < 300; n++) {
      const base = Date.parse('2026-01-01T00:00:00Z');
      // Whole seconds, quarter hours or arbitrary milliseconds.
      const grid = [1, 1000, 900_000, H][Math.floor(rnd() * 4)] as number;
      const start = base + Math.floor((rnd() * 20 * D) / grid) * grid;
      const end = start + 1 + Math.floor(rnd() * 6 * D);
      const parts = pieces(rollupReadPlan(start, end));
      const wrong: string[] = [];
      if (parts[0]?.lo !== start || parts.at(-1)?.hi !== end) wrong.push('not from start to end');
      for (let k = 1; k < parts.length; k++) if (parts[k]?.lo !== parts[k - 1]?.hi) wrong.push(`gap or overlap at ${parts[k]?.lo}`);
      for (const p of parts) {
        if (p.span === null) continue;
        if (!(ROLLUP_SPANS_S as readonly number[]).includes(p.span) || p.lo % (p.span * 1000) !== 0) wrong.push(`row ${p.lo} of span ${p.span} misaligned`);
      }
      expect({ start, end, wrong }).toEqual({ start, end, wrong: [] });
    }
  });
});

describe('energy buckets from running day sums', () => {
  const SLOT = 900_000;
  const DAY = 86_400_000;

  it('places each edge in its UTC day, after the whole slots before it, with the rest of a slot raw', () => {
    const t = (iso: string) => Date.parse(iso);
    const edges = bucketEdges(t('2026-03-01T22:10:00Z'), t('2026-03-03T00:00:00Z'), [t('2026-03-01T00:00:00Z'), t('2026-03-02T00:00:00Z'), t('2026-03-02T23:45:00Z')]);
    expect(edges).toEqual([
      { dayS: t('2026-03-01T00:00:00Z') / 1000, slots: 88, rawFromMs: t('2026-03-01T22:00:00Z'), ms: t('2026-03-01T22:10:00Z') },
      { dayS: t('2026-03-02T00:00:00Z') / 1000, slots: 0, rawFromMs: null, ms: t('2026-03-02T00:00:00Z') },
      { dayS: t('2026-03-02T00:00:00Z') / 1000, slots: 95, rawFromMs: null, ms: t('2026-03-02T23:45:00Z') },
      { dayS: t('2026-03-03T00:00:00Z') / 1000, slots: 0, rawFromMs: null, ms: t('2026-03-03T00:00:00Z') },
    ]);
  });

  /**
   * What the store reads for the edges, from records given as [start ms, µWh, reset]: day totals,
   * running sums at whole slots, raw records between a quarter hour and an unaligned edge.
   */
  function storeSums(records: Array<[number, bigint, boolean]>, edges: EdgePlace[]): EdgeSums {
    const sum = (keep: (ms: number) => boolean): EnergyCount =>
      records.filter(([ms]) => keep(ms)).reduce((a, [, uwh, reset]) => ({ uwh: a.uwh + uwh, n: a.n + 1, resets: a.resets + (reset ? 1 : 0) }), NO_ENERGY);
    const firstDay = (edges[0] as EdgePlace).dayS * 1000;
    const lastDay = (edges.at(-1) as EdgePlace).dayS * 1000;
    const days: EdgeSums['days'] = [];
    for (let d = firstDay; d < lastDay; d += DAY) {
      const total = sum((ms) => ms >= d && ms < d + DAY);
      if (total.n > 0) days.push({ dayS: d / 1000, total });
    }
    const raw = new Map<number, EnergyCount>();
    edges.forEach((e, k) => {
      if (e.rawFromMs !== null) raw.set(k, sum((ms) => ms >= (e.rawFromMs as number) && ms < e.ms));
    });
    return { days, inDay: edges.map((e) => sum((ms) => ms >= e.dayS * 1000 && ms < e.dayS * 1000 + e.slots * SLOT)), raw };
  }

  it.each([1, 2, 3, 4])('equal the bucket sums of the records themselves, for edges at any millisecond (seed %i)', (seed) => {
    const rnd = random(seed + 200);
    for (let n = 0; n < 60; n++) {
      const base = Date.parse('2026-01-01T00:00:00Z');
      const grid = [1, 1000, SLOT, 3_600_000][Math.floor(rnd() * 4)] as number;
      const start = base + Math.floor((rnd() * 5 * DAY) / grid) * grid;
      const end = start + grid + Math.floor((rnd() * 4 * DAY) / grid) * grid;
      const boundaries = [start - Math.floor(rnd() * 3_600_000)];
      while ((boundaries.at(-1) as number) < end) boundaries.push((boundaries.at(-1) as number) + 1 + Math.floor(rnd() * 0.6 * DAY));
      const records: Array<[number, bigint, boolean]> = [];
      for (let k = 0; k < 400; k++) records.push([base - DAY + Math.floor(rnd() * 11 * DAY), BigInt(Math.floor(rnd() * 1e12)) * 1000n + 7n, rnd() < 0.1]);
      const edges = bucketEdges(start, end, boundaries);
      const got = bucketsFromEdges(edges, storeSums(records, edges));
      const expected: Array<{ index: number; energy: EnergyCount }> = [];
      let total = NO_ENERGY;
      for (let k = 0; k + 1 < edges.length; k++) {
        const inBucket = records.filter(([ms]) => ms >= (edges[k] as EdgePlace).ms && ms < (edges[k + 1] as EdgePlace).ms);
        const energy = inBucket.reduce((a, [, uwh, reset]) => ({ uwh: a.uwh + uwh, n: a.n + 1, resets: a.resets + (reset ? 1 : 0) }), NO_ENERGY);
        total = { uwh: total.uwh + energy.uwh, n: total.n + energy.n, resets: total.resets + energy.resets };
        if (energy.n > 0) expected.push({ index: k, energy });
      }
      expect(got).toEqual({ buckets: expected, total });
    }
  });

  it('keeps micro-watt-hours exact past 2^53', () => {
    const day = Date.parse('2026-05-01T00:00:00Z');
    const edges = bucketEdges(day, day + 2 * DAY, [day, day + DAY, day + 2 * DAY]);
    const big = 2n ** 60n + 1n;
    const sums: EdgeSums = {
      days: [{ dayS: day / 1000, total: { uwh: big, n: 1, resets: 0 } }],
      inDay: [NO_ENERGY, NO_ENERGY, { uwh: 3n, n: 1, resets: 1 }],
      raw: new Map(),
    };
    expect(bucketsFromEdges(edges, sums)).toEqual({
      buckets: [
        { index: 0, energy: { uwh: big, n: 1, resets: 0 } },
        { index: 1, energy: { uwh: 3n, n: 1, resets: 1 } },
      ],
      total: { uwh: big + 3n, n: 2, resets: 1 },
    });
  });
});

describe('zone offsets from few lookups', () => {
  const zones = ['Europe/Berlin', 'America/New_York', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'America/Santiago', 'Pacific/Apia', 'Africa/Casablanca', 'Asia/Gaza', 'Africa/Monrovia', 'UTC'];

  it.each(zones)('%s: a lookup equals luxon at random instants 1960 to 2100', (zone) => {
    const rnd = random(zone.length);
    const tz = IANAZone.create(zone);
    for (let n = 0; n < 300; n++) {
      const ms = Date.parse('1960-01-01T00:00:00Z') + Math.floor(rnd() * 140 * 365.25 * 86_400_000);
      expect(offsetMinutes(zone, ms)).toBe(tz.offset(ms));
    }
  });

  /** The instant (whole second) in (lo, hi] where luxon's offset changes, found by bisection. */
  function changeIn(tz: IANAZone, lo: number, hi: number): number {
    const before = tz.offset(lo);
    while (hi - lo > 1000) {
      const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
      if (tz.offset(mid) === before) lo = mid;
      else hi = mid;
    }
    return hi;
  }

  it.each(zones)('%s: the timeline equals luxon at every change and around it', (zone) => {
    const tz = IANAZone.create(zone);
    const offsets = offsetsOf(zone);
    // Hourly through 1971-1972 (Monrovia left its -00:44:30) and 2011 (Apia skipped a day), to the second at each change.
    for (const [a, b] of [['1971-06-01', '1972-06-01'], ['2011-01-01', '2012-01-01']] as const) {
      let previous = tz.offset(Date.parse(`${a}T00:00:00Z`));
      for (let ms = Date.parse(`${a}T00:00:00Z`); ms < Date.parse(`${b}T00:00:00Z`); ms += 3_600_000) {
        const expected = tz.offset(ms);
        if (expected !== previous) {
          const change = changeIn(tz, ms - 3_600_000, ms);
          for (const d of [-1001, -1000, -1, 0, 1, 999, 1000]) expect(offsets.at(change + d)).toBe(tz.offset(change + d));
        }
        expect(offsets.at(ms)).toBe(expected);
        previous = expected;
      }
    }
    const rnd = random(zone.length + 7);
    for (let n = 0; n < 200; n++) {
      const ms = Date.parse('2012-01-01T00:00:00Z') + Math.floor(rnd() * 28 * 365 * 86_400_000);
      expect(offsets.at(ms)).toBe(tz.offset(ms));
    }
  });
});

/**
 * Hour buckets from their definition, on luxon's offsets alone: a bucket is a run of instants
 * that show the same local hour with the same offset. Scanned by quarter hour, where every local
 * hour and every offset change of these zones in 2026 falls.
 */
function hourBucketsByLuxon(start: Date, end: Date, zone: string): Array<{ start: number; end: number; label: string }> {
  const tz = IANAZone.create(zone);
  const quarter = 900_000;
  const hourOf = (ms: number): string => {
    const local = DateTime.fromMillis(ms, { zone: tz });
    return `${local.toFormat('yyyy-MM-dd HH')} ${local.offset}`;
  };
  let from = Math.floor(start.getTime() / quarter) * quarter;
  while (hourOf(from - quarter) === hourOf(from)) from -= quarter;
  const out: Array<{ start: number; end: number; label: string }> = [];
  let hour = hourOf(from);
  for (let ms = from + quarter; from < end.getTime(); ms += quarter) {
    const next = hourOf(ms);
    if (next === hour) continue;
    out.push({ start: from, end: ms, label: DateTime.fromMillis(from, { zone: tz }).toFormat("yyyy-MM-dd'T'HH:mm:ssZZ") });
    from = ms;
    hour = next;
  }
  return out;
}

describe('hour buckets on cached offsets', () => {
  it.each(['Europe/Berlin', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'America/St_Johns', 'Asia/Tehran', 'Pacific/Chatham'])('%s: equal to the local hours by luxon over a year', (zone) => {
    for (let m = 0; m < 12; m += 2) {
      const start = new Date(Date.UTC(2026, m, 1));
      const end = new Date(Date.UTC(2026, m + 2, 1));
      expect(bucketsFor(start, end, 'hour', zone).map((b) => ({ start: b.start, end: b.end, label: bucketLabel(b) }))).toEqual(hourBucketsByLuxon(start, end, zone));
    }
  });
});

describe('ISO times', () => {
  it('writes what toISOString writes to the second, from 1900 to beyond 9999, in any order', () => {
    const rnd = random(42);
    const write = isoByteWriter(true);
    const out = Buffer.alloc(64);
    const text = (ms: number): string => out.toString('latin1', 0, write(ms, out, 0));
    for (let n = 0; n < 5000; n++) {
      const ms = Math.floor((rnd() * 2 - 0.5) * 8.2e12 * 30) + (n % 3 === 0 ? 0 : Math.floor(rnd() * 1000));
      expect(text(ms)).toBe(new Date(ms).toISOString().slice(0, -5));
    }
    expect(text(Date.UTC(10000, 0, 1, 0, 0, 0, 500))).toBe('+010000-01-01T00:00:00');
  });

  it("writes toISOString's bytes, milliseconds included, into a buffer at any place in it", () => {
    const rnd = random(43);
    const write = isoByteWriter();
    const out = Buffer.alloc(64);
    for (let n = 0; n < 5000; n++) {
      const ms = Math.floor((rnd() * 2 - 0.5) * 8.2e12 * 30) + Math.floor(rnd() * 1000);
      const at = n % 7;
      const end = write(ms, out, at);
      expect(out.toString('latin1', at, end)).toBe(new Date(ms).toISOString());
    }
    const end = write(Date.UTC(10000, 0, 1, 23, 59, 59, 999), out, 0);
    expect(out.toString('latin1', 0, end)).toBe('+010000-01-01T23:59:59.999Z');
  });

  it('writes offsets as ±HH:MM, with seconds only where the offset has them', () => {
    expect([isoOffset(0), isoOffset(345), isoOffset(-210), isoOffset(630)]).toEqual(['+00:00', '+05:45', '-03:30', '+10:30']);
    // Africa/Monrovia until 1972-01-07: −00:44:30 (it was written "-00:44.5").
    expect(isoOffset(-44.5)).toBe('-00:44:30');
  });
});
