/**
 * The energy answer's writer (domain/energy-answer.ts) against its points built as objects and
 * serialized by JSON.stringify (raw-reference.ts, referencePoints): the same bytes for any sums;
 * and the reading of the energy sums list the store gets from Postgres.
 */
import type { BucketEnergy } from '../src/domain/day-energy';
import { bucketsFor, type Bucket } from '../src/domain/energy';
import { writeEnergyAnswer } from '../src/domain/energy-answer';
import { forEachEntry } from '../src/store/day-energy';
import { referencePoints } from './raw-reference';
import { seededRandom } from './seeded-random';

const before = { device_id: 'CAB12CD00001', bucket: 'hour', window: { start: '2026-06-01T00:00:00.000Z', end: '2026-06-01T03:00:00.000Z' } };

/** The answer the service wrote, and the one JSON.stringify writes of the same points as objects. */
function bothWays(buckets: Bucket[], sums: BucketEnergy[], after: Record<string, unknown> = { total: null }): { written: string; reference: string } {
  const written = writeEnergyAnswer(before, buckets, sums, after).toString('utf8');
  const asObjects = sums.map(({ index, energy }) => ({ index, energyWh: Number(energy.uwh) / 1e6, intervals: energy.n, resets: energy.resets }));
  const reference = JSON.stringify({ ...before, points: referencePoints(buckets, asObjects), ...after });
  return { written, reference };
}

const sum = (index: number, uwh: bigint, n = 4, resets = 0): BucketEnergy => ({ index, energy: { uwh, n, resets } });

describe('energy answer writer', () => {
  const hours = bucketsFor(new Date('2026-06-01T00:00:00Z'), new Date('2026-06-01T03:00:00Z'), 'hour', undefined);

  it('writes null energy where a bucket has no sum and a reset where one was flagged', () => {
    const written = writeEnergyAnswer(before, hours, [sum(1, 12_345_679n, 2, 1)], { total: null, tz: 'UTC' }).toString('utf8');
    expect(JSON.parse(written)).toEqual({
      ...before,
      points: [
        { start_at: '2026-06-01T00:00:00Z', energy_wh: null, reset: false },
        { start_at: '2026-06-01T01:00:00Z', energy_wh: 12.345679, reset: true },
        { start_at: '2026-06-01T02:00:00Z', energy_wh: null, reset: false },
      ],
      total: null,
      tz: 'UTC',
    });
    const { written: again, reference } = bothWays(hours, [sum(1, 12_345_679n, 2, 1)], { total: null, tz: 'UTC' });
    expect(again).toBe(reference);
  });

  it('writes every energy as JSON.stringify writes it: zero, negative, whole, fractional, at and past 1e15 µWh', () => {
    const values = [0n, 1n, -1n, 10n, 100_000n, 999_999n, 1_000_000n, 1_000_001n, 120_000_000n, -120_500_000n, 3_000_000_123n,
      999_999_999_999_999n, -999_999_999_999_999n, 1_000_000_000_000_000n, 1_234_567_890_123_456n, 9_007_199_254_740_993n,
      -9_007_199_254_740_993n, 123_456_789_012_345_678_901_234_567n];
    const buckets = bucketsFor(new Date(0), new Date(values.length * 3_600_000), 'hour', undefined);
    const { written, reference } = bothWays(buckets, values.map((v, i) => sum(i, v)));
    expect(written).toBe(reference);
  });

  it('writes a bucket whose records carried no counter reading as null, with its reset', () => {
    const { written, reference } = bothWays(hours, [sum(0, 5n, 0, 1), sum(2, 7n, 1, 0)]);
    expect(written).toBe(reference);
    expect(JSON.parse(written).points.map((p: { energy_wh: unknown }) => p.energy_wh)).toEqual([null, null, 0.000007]);
  });

  it('writes the members around the points as JSON.stringify does, and an answer without sums', () => {
    const { written, reference } = bothWays(hours, [], { total: { energy_wh: 1.5, resets: 0, intervals: 3, buckets: 3 }, tz: 'Europe/Berlin' });
    expect(written).toBe(reference);
    expect(writeEnergyAnswer({}, [], [], {}).toString('utf8')).toBe('{"points":[]}');
  });

  it('matches on random sums over zones, widths and a long answer after a short one', () => {
    const rnd = seededRandom(20261129);
    const zones = [undefined, 'Europe/Berlin', 'America/New_York', 'Asia/Kolkata', 'Australia/Lord_Howe', 'Pacific/Chatham'];
    for (let round = 0; round < 60; round += 1) {
      const zone = zones[round % zones.length];
      const width = round % 3 === 0 ? 'day' : 'hour';
      const start = Date.UTC(2024, 0, 1) + Math.floor(rnd() * 700) * 86_400_000 + Math.floor(rnd() * 86_400_000);
      const span = (width === 'day' ? 86_400_000 * 400 : 3_600_000 * 1900) * rnd();
      const buckets = bucketsFor(new Date(start), new Date(start + Math.max(span, 60_000)), width, zone);
      const sums: BucketEnergy[] = [];
      for (let i = 0; i < buckets.length; i += 1) {
        if (rnd() < 0.2) continue;
        const scale = 10 ** Math.floor(rnd() * 19);
        const uwh = BigInt(Math.floor(rnd() * scale)) * (rnd() < 0.05 ? -1n : 1n);
        sums.push(sum(i, uwh, Math.floor(rnd() * 3), rnd() < 0.1 ? 1 : 0));
      }
      const { written, reference } = bothWays(buckets, sums, { total: null, ...(zone ? { tz: zone } : {}) });
      expect({ round, written }).toEqual({ round, written: reference });
    }
  });
});

describe('energy sums list as read', () => {
  const read = (text: string | null, keyCount: 1 | 2) => {
    const entries: Array<[number, number, bigint, number, number]> = [];
    forEachEntry(text, keyCount, (k0, k1, s) => entries.push([k0, k1, s.uwh, s.n, s.resets]));
    return entries;
  };

  it('reads entries with one or two keys, negative sums and sums of any size exactly', () => {
    expect(read('1740787200,4,123,2,0;1740787200,96,-5,1,1', 2)).toEqual([
      [1740787200, 4, 123n, 2, 0],
      [1740787200, 96, -5n, 1, 1],
    ]);
    expect(read('3,999999999999999,4,0;7,-123456789012345678901,2,1;8,9007199254740993,1,0', 1)).toEqual([
      [3, 0, 999_999_999_999_999n, 4, 0],
      [7, 0, -123_456_789_012_345_678_901n, 2, 1],
      [8, 0, 9_007_199_254_740_993n, 1, 0],
    ]);
    expect(read(null, 2)).toEqual([]);
    expect(read('', 1)).toEqual([]);
  });

  it('refuses text that is not whole numbers', () => {
    expect(() => read('1,2,x,4,5', 2)).toThrow('not whole numbers');
    expect(() => read('1,2,3,4', 2)).toThrow('not whole numbers');
  });
});
