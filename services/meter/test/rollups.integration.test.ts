/**
 * Rollups against the raw records on a real Postgres: after randomized ingest (records late and
 * out of order, repeated, quarantined, without reads, counters reset, CT changes, clears), the
 * stored rollups equal rollups recomputed from the raw records, and every summary and energy
 * answer equals the one computed from the raw records alone (test/raw-reference.ts), for
 * windows with unaligned edges and buckets of zones with DST and 30/45-minute offsets.
 */
import fs from 'node:fs';
import path from 'node:path';
import { JsonBody, type HandlerResult } from '@fleet/service-kit';
import { randomDeviceId } from '@fleet/test-kit';
import type { BucketWidth } from '../src/domain/energy';
import { parseRecord, type ParsedRecord } from '../src/domain/record';
import { getEnergy, getSummary } from '../src/handlers/reads';
import { MIGRATIONS_DIR } from '../src/migrations';
import { ingestRecords } from '../src/store/ingest';
import { openMeterReader } from '../src/store/prisma';
import { clearDevice } from '../src/store/records';
import { dayEnergyStoredAndRecomputed, rawEnergyAnswer, rawSummaryAnswer, rollupsStoredAndRecomputed } from './raw-reference';
import { seededRandom as random } from './seeded-random';
import { bodyOf, createTestDb, envelope, makeRecord, randomSid, type TestDb } from './support';

let testDb: TestDb;
/** Answers are read as the service reads them: through its prepared reader. */
let reader: ReturnType<typeof openMeterReader>;

beforeAll(async () => {
  testDb = await createTestDb();
  reader = openMeterReader(testDb.url, 2);
});
afterAll(async () => {
  await reader?.close();
  await testDb?.drop();
});

const RECEIVED = new Date('2026-11-01T00:00:00Z');
const parsed = (deviceId: string, payload: object): ParsedRecord => parseRecord(deviceId, Buffer.from(JSON.stringify(payload)), RECEIVED);

/**
 * Records of one meter from `fromS` on, in seq order per stream: starts at any millisecond,
 * durations from 0 to an hour (or absent), some without reads or counter, counters that
 * restart, CT turns that change, quarantined ones and ones without a clock.
 */
function meterRecords(rnd: () => number, deviceId: string, fromS: number, days: number): ParsedRecord[] {
  const out: ParsedRecord[] = [];
  for (let stream = 0; stream < 3; stream++) {
    const sid = randomSid();
    let counter = 1000 + rnd() * 5000;
    let at = fromS + rnd() * 3600;
    for (let seq = 0; at < fromS + days * 86_400; seq++) {
      const dur = [0, 30, 60, 300, 900, 900, 3600][Math.floor(rnd() * 7)] as number;
      const ct = seq % 40 < 25 ? 1 : 2;
      const w = rnd() < 0.1 ? rnd() * 4 : rnd() * 3000;
      const rec: Record<string, unknown> = { ...makeRecord(sid, seq, Math.round(at * 1000) / 1000, { dur, ct, w, e0: Math.round(counter * 1000) / 1000 }) };
      counter = (rec.e as number[])[1] as number;
      const pick = rnd();
      if (pick < 0.04) rec.ct = 0; // quarantined, with a start
      else if (pick < 0.07) Object.assign(rec, { clock: 'none', start: null }); // no start
      else if (pick < 0.12) Object.assign(rec, { n: 0, err: Math.min(dur, 5), v: null, i: null, p: null, f: null, pf: null, e: null });
      else if (pick < 0.15) rec.e = null;
      else if (pick < 0.18) rec.e = [counter, 3 + rnd() * 10]; // restarted inside the record
      else if (pick < 0.21) rec.e = [0.5, 0.5 + rnd() * 20]; // restarted since the previous one
      else if (pick < 0.24) delete rec.dur;
      if (Array.isArray(rec.e)) counter = rec.e[1] as number;
      rec.partial = rnd() < 0.05;
      out.push(parsed(deviceId, rec));
      at += 120 + rnd() * 3000;
    }
  }
  return out;
}

function shuffle<T>(rnd: () => number, xs: T[]): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [a[i], a[j]] = [a[j] as T, a[i] as T];
  }
  return a;
}

/** Ingests in random batches, every record late or early, some sent twice. */
async function ingestShuffled(rnd: () => number, records: ParsedRecord[], between?: (batch: number) => Promise<void>): Promise<void> {
  const all = shuffle(rnd, [...records, ...records.filter(() => rnd() < 0.05)]);
  for (let k = 0, batch = 0; k < all.length; batch++) {
    const size = 1 + Math.floor(rnd() * 250);
    await ingestRecords(testDb.db, all.slice(k, k + size));
    k += size;
    await between?.(batch);
  }
}

/** A window inside [fromMs, toMs): edges at any millisecond, or on quarter hours, hours or days. */
function randomWindow(rnd: () => number, fromMs: number, toMs: number, maxDays: number): { start: Date; end: Date } {
  const grid = [1, 1000, 900_000, 3_600_000, 86_400_000][Math.floor(rnd() * 5)] as number;
  const start = fromMs + Math.floor((rnd() * (toMs - fromMs)) / grid) * grid;
  const end = Math.min(toMs, start + Math.max(grid, Math.floor((rnd() * maxDays * 86_400_000) / grid) * grid));
  return { start: new Date(start), end: new Date(end > start ? end : start + 1) };
}

/** An energy answer's body, held to the text JSON.stringify writes of it (the service writes it as bytes). */
function energyBody(result: HandlerResult): Record<string, unknown> {
  const body = bodyOf(result);
  expect(result.body instanceof JsonBody && Buffer.from(result.body.bytes).toString('utf8')).toBe(JSON.stringify(body));
  return body;
}

const ZONES = [undefined, 'Europe/Berlin', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'America/New_York'];

/** Compares answers read from rollups with the raw computation over random windows. */
async function expectAnswersEqualRaw(rnd: () => number, deviceId: string, fromMs: number, toMs: number, windows: number): Promise<void> {
  for (let n = 0; n < windows; n++) {
    const width: BucketWidth = rnd() < 0.5 ? 'hour' : 'day';
    const zone = ZONES[Math.floor(rnd() * ZONES.length)];
    const window = randomWindow(rnd, fromMs, toMs, width === 'hour' ? 20 : 40);
    const query = { start: window.start.toISOString(), end: window.end.toISOString(), bucket: width, ...(zone ? { tz: zone } : {}) };
    const energy = energyBody(await getEnergy(reader, envelope(deviceId, query)));
    const raw = await rawEnergyAnswer(testDb.db, deviceId, window, width, zone);
    expect({ query, points: energy.points, total: energy.total }).toEqual({ query, ...raw });
    const summary = (await getSummary(reader, envelope(deviceId, { start: query.start, end: query.end }))).body as Record<string, unknown>;
    const { device_id: _d, window: _w, ...sums } = summary;
    expect({ query, ...sums }).toEqual({ query, ...(await rawSummaryAnswer(testDb.db, deviceId, window)) });
  }
}

describe('rollups', () => {
  it.each([
    ['spring: Berlin and Lord Howe change their clocks', 11, '2026-03-27T00:00:00Z'],
    ['autumn: Lord Howe and Berlin change their clocks', 10, '2026-10-01T00:00:00Z'],
  ])('equal the raw records after shuffled ingest with repeats and a clear (%s; seed %i)', async (_what, seed, from) => {
    const rnd = random(seed);
    const fromS = Date.parse(from) / 1000;
    const days = 26;
    const kept = randomDeviceId();
    const cleared = randomDeviceId();
    const records = [...meterRecords(rnd, kept, fromS, days), ...meterRecords(rnd, cleared, fromS, days)];
    // The second meter is cleared halfway: records from before it that arrive later are not stored.
    await ingestShuffled(rnd, records, async (batch) => {
      if (batch === 50) await clearDevice(testDb.db, cleared);
    });
    // After the clear, a restarted meter (a new stream) keeps sending.
    await ingestShuffled(rnd, meterRecords(rnd, cleared, fromS + (days - 3) * 86_400, 3));

    const { stored, recomputed } = await rollupsStoredAndRecomputed(testDb.db, [kept, cleared]);
    expect(stored.length).toBeGreaterThan(1000);
    expect(stored).toEqual(recomputed);
    const dayEnergy = await dayEnergyStoredAndRecomputed(testDb.db, [kept, cleared]);
    expect(dayEnergy.stored.length).toBeGreaterThan(25);
    expect(dayEnergy.stored).toEqual(dayEnergy.recomputed);

    const fromMs = fromS * 1000 - 86_400_000;
    const toMs = (fromS + days * 86_400) * 1000 + 86_400_000;
    await expectAnswersEqualRaw(rnd, kept, fromMs, toMs, 30);
    await expectAnswersEqualRaw(rnd, cleared, fromMs, toMs, 10);
  }, 90_000);

  it('moves a reset between slots when a late record lands before a stored one', async () => {
    const dev = randomDeviceId();
    const sid = randomSid();
    const t0 = Date.parse('2026-06-01T00:00:00Z') / 1000;
    const rec = (seq: number, first: number, last: number) => parsed(dev, { ...makeRecord(sid, seq, t0 + seq * 3600, { dur: 900 }), e: [first, last] });
    await ingestRecords(testDb.db, [rec(0, 100, 110), rec(2, 5, 15)]); // 2 starts below 0's last reading: a reset
    const resets = async () =>
      (energyBody(await getEnergy(reader, envelope(dev, { start: String(t0), end: String(t0 + 3 * 3600) }))).points as Array<{ reset: boolean }>).map((p) => p.reset);
    expect(await resets()).toEqual([false, false, true]);
    // Late seq 1 ends at 4 (its counter went backwards): the reset is 1's now, and 2 follows on from it.
    await ingestRecords(testDb.db, [rec(1, 110, 4)]);
    expect(await resets()).toEqual([false, true, false]);
    const { stored, recomputed } = await rollupsStoredAndRecomputed(testDb.db, [dev]);
    expect(stored).toEqual(recomputed);
    const dayEnergy = await dayEnergyStoredAndRecomputed(testDb.db, [dev]);
    expect(dayEnergy.stored).toEqual(dayEnergy.recomputed);
  });

  it('day energy rows grow with records sent in order, several to a slot and a slot split across batches', async () => {
    const dev = randomDeviceId();
    const sid = randomSid();
    const t0 = Date.parse('2026-07-01T20:00:00Z') / 1000;
    let counter = 500;
    const records: ParsedRecord[] = [];
    // One record a minute for eight hours, across midnight: 15 to a slot.
    for (let seq = 0; seq < 480; seq++) {
      const used = 1 + (seq % 7) * 0.25;
      records.push(parsed(dev, { ...makeRecord(sid, seq, t0 + seq * 60, { dur: 60 }), e: [counter, counter + used] }));
      counter += used;
    }
    // Batches of 37: most end inside a slot, the next batch adds to that slot.
    for (let k = 0; k < records.length; k += 37) await ingestRecords(testDb.db, records.slice(k, k + 37));
    const dayEnergy = await dayEnergyStoredAndRecomputed(testDb.db, [dev]);
    expect(dayEnergy.stored).toHaveLength(2);
    expect(dayEnergy.stored).toEqual(dayEnergy.recomputed);
    for (const zone of ['Asia/Kolkata', 'America/New_York']) {
      const window = { start: new Date((t0 + 1234) * 1000), end: new Date((t0 + 8 * 3600 - 99) * 1000) };
      const energy = energyBody(await getEnergy(reader, envelope(dev, { start: window.start.toISOString(), end: window.end.toISOString(), bucket: 'hour', tz: zone })));
      expect({ points: energy.points, total: energy.total }).toEqual(await rawEnergyAnswer(testDb.db, dev, window, 'hour', zone));
    }
  });

  it.each([
    // 02:00+10:30 becomes 02:30+11:00 at 15:30 UTC: the local hour 02 lasts 30 minutes.
    ['spring', '2026-10-03T14:30:00Z', 8, ['2026-10-04T01:00:00+10:30', '2026-10-04T02:30:00+11:00', '2026-10-04T03:00:00+11:00'], [4, 2, 2]],
    // 02:00+11:00 becomes 01:30+10:30 at 15:00 UTC: the repeated half hour is a bucket of its own.
    ['autumn', '2026-04-04T14:00:00Z', 10, ['2026-04-05T01:00:00+11:00', '2026-04-05T01:30:00+10:30', '2026-04-05T02:00:00+10:30'], [4, 2, 4]],
  ] as const)("sums Lord Howe's local hours at its 30-minute %s change, from rollups and from raw records", async (_what, from, count, labels, wh) => {
    const dev = randomDeviceId();
    const sid = randomSid();
    const fromS = Date.parse(from) / 1000;
    // One record every quarter hour, each using 1 Wh.
    await ingestRecords(testDb.db, Array.from({ length: count }, (_, k) => parsed(dev, { ...makeRecord(sid, k, fromS + k * 900), e: [1000 + k, 1001 + k] })));
    const window = { start: new Date(fromS * 1000), end: new Date((fromS + count * 900) * 1000) };
    const energy = energyBody(await getEnergy(reader, envelope(dev, { start: window.start.toISOString(), end: window.end.toISOString(), tz: 'Australia/Lord_Howe' })));
    expect(energy.points).toEqual(labels.map((start_at, k) => ({ start_at, energy_wh: wh[k], reset: false })));
    expect({ points: energy.points, total: energy.total }).toEqual(await rawEnergyAnswer(testDb.db, dev, window, 'hour', 'Australia/Lord_Howe'));
    // Window edges inside slots: the records between an edge and its quarter hour are read raw.
    const inner = { start: new Date((fromS + 600) * 1000), end: new Date((fromS + count * 900 - 600) * 1000) };
    const trimmed = energyBody(await getEnergy(reader, envelope(dev, { start: inner.start.toISOString(), end: inner.end.toISOString(), tz: 'Australia/Lord_Howe' })));
    expect((trimmed.points as Array<{ start_at: string }>).map((p) => p.start_at)).toEqual(labels);
    expect((trimmed.points as Array<{ energy_wh: number }>).map((p) => p.energy_wh)).toEqual([wh[0] - 1, wh[1], wh[2]]);
    expect({ points: trimmed.points, total: trimmed.total }).toEqual(await rawEnergyAnswer(testDb.db, dev, inner, 'hour', 'Australia/Lord_Howe'));
  });

  it('answers exactly where a zone offset is not a whole number of quarter hours (Monrovia before 1972)', async () => {
    const dev = randomDeviceId();
    const rnd = random(1971);
    await ingestShuffled(rnd, meterRecords(rnd, dev, Date.parse('1971-12-20T00:00:00Z') / 1000, 22));
    // Africa/Monrovia was UTC-00:44:30 until 1972-01-07: its midnights fall inside slots, read from raw records.
    for (const width of ['day', 'hour'] as const) {
      const window = { start: new Date('1971-12-21T00:00:00Z'), end: new Date(width === 'day' ? '1972-01-11T00:00:00Z' : '1972-01-10T00:00:00Z') };
      const energy = energyBody(await getEnergy(reader, envelope(dev, { start: window.start.toISOString(), end: window.end.toISOString(), bucket: width, tz: 'Africa/Monrovia' })));
      const raw = await rawEnergyAnswer(testDb.db, dev, window, width, 'Africa/Monrovia');
      expect(raw.points.filter((p) => p.energy_wh !== null).length).toBeGreaterThan(5);
      expect({ points: energy.points, total: energy.total }).toEqual(raw);
      // Each label names its own instant, with the offset's seconds.
      for (const p of energy.points as Array<{ start_at: string }>) expect(p.start_at).toMatch(/T\d\d:\d\d:\d\d(-00:44:30|Z|[+-]00:00)$/);
    }
  }, 60_000);

  it.each([
    ['rollups', '20261125230215_meter_rollups', 'meter_rollups', 'WHERE start_at IS NOT NULL', rollupsStoredAndRecomputed, 100],
    ['day energy rows', '20261129010000_meter_day_energy', 'meter_day_energy', 'WHERE span = 86400', dayEnergyStoredAndRecomputed, 5],
  ] as const)('%s are backfilled by their migration for what was stored before it', async (_what, folder, table, where, storedAndRecomputed, least) => {
    const dev = randomDeviceId();
    const rnd = random(7);
    await ingestShuffled(rnd, meterRecords(rnd, dev, Date.parse('2026-05-01T00:00:00Z') / 1000, 5));
    const before = await storedAndRecomputed(testDb.db, [dev]);
    const migration = fs.readFileSync(path.join(MIGRATIONS_DIR, folder, 'migration.sql'), 'utf8');
    const backfill = migration.slice(migration.indexOf(`INSERT INTO ${table}`));
    // As if this meter's records had been stored before the table existed: its rows refilled by the migration's statement.
    await testDb.db.$executeRawUnsafe(`DELETE FROM ${table} WHERE device_id = $1`, dev);
    await testDb.db.$executeRawUnsafe(backfill.replace(where, `${where} AND device_id = '${dev}'`));
    const after = await storedAndRecomputed(testDb.db, [dev]);
    expect(after.stored).toEqual(before.stored);
    expect(after.stored).toEqual(after.recomputed);
    expect(before.stored.length).toBeGreaterThanOrEqual(least);
  });
});
