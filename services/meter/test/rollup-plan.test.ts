/**
 * The pure parts of rollup reads: which rollup rows and raw ranges make up a window
 * (domain/rollup-plan.ts), zone offsets from few lookups (domain/zone-offsets.ts), buckets
 * built on them, and ISO times written without a Date each.
 */
import { DateTime, IANAZone } from 'luxon';
import { bucketsFor } from '../src/domain/energy';
import { isoOffset, isoWriter } from '../src/domain/iso-time';
import { energyReadPlan, ROLLUP_SPANS_S, rollupReadPlan, type RollupReadPlan } from '../src/domain/rollup-plan';
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

describe('energy read plan', () => {
  const SLOT = 900;
  /** Signed count of every slot (epoch seconds) per bucket: rows placed by start go to the bucket holding their start. */
  function slotWeights(startMs: number, endMs: number, boundaries: number[]): Map<string, number> {
    const plan = energyReadPlan(startMs, endMs, boundaries);
    const bucketOf = (ms: number): number => boundaries.filter((b) => b <= ms).length - 1;
    const weights = new Map<string, number>();
    const add = (bucket: number, slot: number, sign: number): void => {
      const key = `${bucket}:${slot}`;
      const w = (weights.get(key) ?? 0) + sign;
      if (w === 0) weights.delete(key);
      else weights.set(key, w);
    };
    const addRow = (bucket: number | null, span: number, start: number, sign: number): void => {
      for (let s = start; s < start + span; s += SLOT) add(bucket ?? bucketOf(start * 1000), s, sign);
    };
    for (const r of plan.rollups) for (let t = r.lo; t < r.hi; t += r.span) addRow(null, r.span, t, 1);
    for (const a of plan.adjustments) for (let t = a.lo; t < a.hi; t += a.span) addRow(a.bucket, a.span, t, a.sign);
    return weights;
  }

  it.each(['Europe/Berlin', 'America/New_York', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'UTC'])(
    '%s: every slot of every day bucket counted once, in its bucket, and nothing else',
    (zone) => {
      const start = Date.parse('2025-03-20T00:00:00Z');
      const end = Date.parse('2025-04-12T00:00:00Z');
      const buckets = bucketsFor(new Date(start), new Date(end), 'day', zone);
      const boundaries = [...buckets.map((b) => b.start), (buckets.at(-1) as { end: number }).end];
      const expected = new Map<string, number>();
      buckets.forEach((b, k) => {
        for (let s = Math.max(b.start, start) / 1000; s < Math.min(b.end, end) / 1000; s += SLOT) expected.set(`${k}:${s}`, 1);
      });
      expect(energyReadPlan(start, end, boundaries).raw).toEqual([]);
      expect(slotWeights(start, end, boundaries)).toEqual(expected);
    },
  );

  it('reads a year of Berlin days as three rows a day in winter and five in summer (not 24), New York hours as one run', () => {
    const start = Date.parse('2025-01-01T00:00:00Z');
    const end = Date.parse('2026-01-01T00:00:00Z');
    const days = bucketsFor(new Date(start), new Date(end), 'day', 'Europe/Berlin');
    const plan = energyReadPlan(start, end, [...days.map((b) => b.start), (days.at(-1) as { end: number }).end]);
    const rowCount = [...plan.rollups, ...plan.adjustments].reduce((n, r) => n + (r.hi - r.lo) / r.span, 0);
    expect(rowCount).toBeLessThanOrEqual(5 * 366);
    expect(plan.adjustments.filter((a) => a.sign === -1)).toHaveLength(365);
    const hours = bucketsFor(new Date(start), new Date(start + 80 * 86_400_000), 'hour', 'America/New_York');
    const hourPlan = energyReadPlan(start, start + 80 * 86_400_000, [...hours.map((b) => b.start), (hours.at(-1) as { end: number }).end]);
    expect(hourPlan).toEqual({ rollups: [{ span: 3600, lo: start / 1000, hi: start / 1000 + 80 * 86_400 }], adjustments: [], raw: [] });
  });

  it.each([1, 2, 3])('random windows and boundaries: each slot once, in the bucket holding it (seed %i)', (seed) => {
    const rnd = random(seed + 100);
    const H = 3_600_000;
    for (let n = 0; n < 100; n++) {
      const base = Date.parse('2026-01-01T00:00:00Z');
      const grid = [1000, 900_000, H][Math.floor(rnd() * 3)] as number;
      const start = base + Math.floor((rnd() * 5 * 86_400_000) / grid) * grid;
      const end = start + grid + Math.floor((rnd() * 3 * 86_400_000) / grid) * grid;
      const boundaries = [start - Math.floor(rnd() * H)];
      while ((boundaries.at(-1) as number) < end) boundaries.push((boundaries.at(-1) as number) + 900_000 * (1 + Math.floor(rnd() * 200)));
      const plan = energyReadPlan(start, end, boundaries);
      const bucketOf = (ms: number): number => boundaries.filter((b) => b <= ms).length - 1;
      const expected = new Map<string, number>();
      for (let ms = Math.ceil(start / 900_000) * 900_000; ms + 900_000 <= end; ms += 900_000) {
        const k = bucketOf(ms);
        // A slot read from the rollups lies inside its bucket; one across a boundary is read raw.
        if (bucketOf(ms + 900_000 - 1) === k && ms >= start) expected.set(`${k}:${ms / 1000}`, 1);
      }
      const rawSlots = plan.raw.flatMap((r) => {
        const out: string[] = [];
        for (let ms = Math.ceil(r.lo / 900_000) * 900_000; ms + 900_000 <= r.hi; ms += 900_000) out.push(`${bucketOf(ms)}:${ms / 1000}`);
        return out;
      });
      for (const key of rawSlots) expected.delete(key);
      expect({ start, end, weights: slotWeights(start, end, boundaries) }).toEqual({ start, end, weights: expected });
    }
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

/** Hour buckets as they were made before offsets were cached: luxon's offset at every hour. */
function hourBucketsByLuxon(start: Date, end: Date, zone: string): Array<{ start: number; end: number; label: string }> {
  const tz = IANAZone.create(zone);
  const out: Array<{ start: number; end: number; label: string }> = [];
  let cursor = DateTime.fromMillis(start.getTime(), { zone: tz }).startOf('hour').toMillis();
  while (cursor < end.getTime()) {
    const next0 = cursor + 3_600_000;
    const local = next0 + tz.offset(next0) * 60_000;
    const misaligned = ((local % 3_600_000) + 3_600_000) % 3_600_000;
    const next = misaligned === 0 || next0 - misaligned <= cursor ? next0 : next0 - misaligned;
    const offset = tz.offset(cursor);
    const label = `${new Date(cursor + offset * 60_000).toISOString().slice(0, 19)}${isoOffset(offset)}`;
    out.push({ start: cursor, end: next, label });
    cursor = next;
  }
  return out;
}

describe('hour buckets on cached offsets', () => {
  it.each(['Europe/Berlin', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'America/St_Johns', 'Asia/Tehran'])('%s: equal to luxon at every hour over a year', (zone) => {
    for (let m = 0; m < 12; m += 2) {
      const start = new Date(Date.UTC(2026, m, 1));
      const end = new Date(Date.UTC(2026, m + 2, 1));
      expect(bucketsFor(start, end, 'hour', zone)).toEqual(hourBucketsByLuxon(start, end, zone));
    }
  });
});

describe('ISO times', () => {
  it('writes what toISOString writes, from 1900 to beyond 9999, in any order', () => {
    const rnd = random(42);
    const write = isoWriter();
    for (let n = 0; n < 5000; n++) {
      const ms = Math.floor((rnd() * 2 - 0.5) * 8.2e12 * 30) + (n % 3 === 0 ? 0 : Math.floor(rnd() * 1000));
      expect(write(ms)).toBe(new Date(ms).toISOString());
    }
    expect(write(Date.UTC(10000, 0, 1, 0, 0, 0, 500))).toBe('+010000-01-01T00:00:00.500Z');
  });

  it('writes offsets as ±HH:MM', () => {
    expect([isoOffset(0), isoOffset(345), isoOffset(-210), isoOffset(630)]).toEqual(['+00:00', '+05:45', '-03:30', '+10:30']);
  });
});
