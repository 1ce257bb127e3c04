/**
 * Ingest from a real JetStream stream (unique name and subject prefix) into a real Postgres
 * database, then the read routes' handlers over what was stored: both listing modes, the
 * summary and energy answers computed independently here, clears.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { JetStreamClient } from 'nats';
import { DurablePullConsumer, metricsRegistry, type Bus } from '@fleet/service-kit';
import { randomDeviceId, uniqueId, waitFor } from '@fleet/test-kit';
import { deviceInProcessor } from '../src/handlers/device-in';
import { getEnergy, getSummary, listIntervals } from '../src/handlers/reads';
import { parseRecord } from '../src/domain/record';
import { MIGRATIONS_DIR } from '../src/migrations';
import { ingestRecords } from '../src/store/ingest';
import { clearDevice } from '../src/store/records';

/** The service's quarantined-record counter, by reason. */
async function quarantinedByReason(): Promise<Record<string, number>> {
  const metric = (await metricsRegistry.getMetricsAsJSON()).find((m) => m.name === 'fleet_meter_records_quarantined_total');
  return Object.fromEntries((metric?.values ?? []).map((v) => [String(v.labels.reason), v.value]));
}
import { bodyOf, connectBus, createStream, createTestDb, deviceSends, envelope, logger, makeRecord, randomSid, type TestDb } from './support';

let testDb: TestDb;
let bus: Bus;
let js: JetStreamClient;
let stream: Awaited<ReturnType<typeof createStream>>;
const workers: DurablePullConsumer[] = [];

beforeAll(async () => {
  testDb = await createTestDb();
  bus = await connectBus();
  stream = await createStream(bus.connection);
  js = bus.connection.jetstream();
  const durable = uniqueId('meter-ingest-');
  // Two replicas share the durable consumer.
  for (let i = 0; i < 2; i++) {
    const w = new DurablePullConsumer(bus.connection, {
      stream: stream.name,
      durable,
      filterSubject: `${stream.prefix}dev.in.meter.>`,
      batch: 50,
      ackWaitS: 30,
      process: deviceInProcessor(testDb.db, stream.prefix, logger),
      logger,
    });
    w.start();
    workers.push(w);
  }
});

afterAll(async () => {
  for (const w of workers) await w.stop();
  await stream?.drop();
  await bus?.drain();
  await testDb?.drop();
});

const T0 = Date.parse('2026-03-28T00:00:00Z') / 1000;
const RECEIVED = new Date('2026-06-01T00:00:00Z');

async function storedCount(deviceId: string): Promise<number> {
  return testDb.db.intervalRecord.count({ where: { deviceId } });
}

type Body = Record<string, unknown> & { records: Array<Record<string, unknown>>; next_cursor: string | null; has_more: boolean };
const list = async (deviceId: string, query: Record<string, unknown>): Promise<Body> => bodyOf(await listIntervals(testDb.db, envelope(deviceId, query))) as unknown as Body;

describe('ingest', () => {
  it('stores each (sid, seq) once, in any order, with flags from the previous record of the stream', async () => {
    const dev = randomDeviceId();
    const sid = randomSid();
    const r0 = makeRecord(sid, 0, T0, { e0: 1000, w: 400 });
    const r1 = makeRecord(sid, 1, T0 + 900, { e0: r0.e![1] + 0.1, w: 400 });
    const r2 = makeRecord(sid, 2, T0 + 1800, { e0: r1.e![1] + 0.1, w: 400, ct: 2 }); // CT change
    const r3 = makeRecord(sid, 3, T0 + 2700, { e0: 0.2, w: 400, ct: 2 }); // counter reset
    // Late and out of order, with duplicates.
    for (const r of [r0, r2, r3, r0, r1, r3]) await deviceSends(js, stream.prefix, dev, 'iv', r, RECEIVED);
    await waitFor(async () => (await storedCount(dev)) === 4, { what: '4 records' });
    await new Promise((r) => setTimeout(r, 300));
    expect(await storedCount(dev)).toBe(4);
    const body = await list(dev, { start: String(T0), end: String(T0 + 3600) });
    expect(body.records.map((r) => r.seq)).toEqual([0, 1, 2, 3]);
    expect(body.records.map((r) => r.flags)).toEqual([
      { partial: false, energy_reset: false, meter_reconfigured: false },
      { partial: false, energy_reset: false, meter_reconfigured: false },
      { partial: false, energy_reset: false, meter_reconfigured: true },
      { partial: false, energy_reset: true, meter_reconfigured: false },
    ]);
    expect(body.records[2]?.power_w).toEqual({ avg: 400, min: 200, max: 600 });
    const round6 = (x: number) => Math.round(x * 1e6) / 1e6;
    expect(body.records[2]?.energy_wh).toEqual({ first: round6(r2.e![0] / 2), last: round6(r2.e![1] / 2) });
    expect(body.records[0]?.received_at).toBe(RECEIVED.toISOString());
  });

  it('recomputes the flags of a stored record when a late record lands before it', async () => {
    const dev = randomDeviceId();
    const sid = randomSid();
    const rec = (seq: number, ct: number, e0: number) => parseRecord(dev, Buffer.from(JSON.stringify(makeRecord(sid, seq, T0 + seq * 900, { ct, e0 }))), RECEIVED);
    await ingestRecords(testDb.db, [rec(0, 1, 100)]);
    await ingestRecords(testDb.db, [rec(2, 2, 500), rec(4, 2, 300)]); // 2: CT changed since 0; 4: counter went backwards since 2
    const flags = async () =>
      (await list(dev, { start: String(T0), end: String(T0 + 7200) })).records.map((r) => [r.seq, (r.flags as Record<string, boolean>).meter_reconfigured, (r.flags as Record<string, boolean>).energy_reset]);
    expect(await flags()).toEqual([
      [0, false, false],
      [2, true, false],
      [4, false, true],
    ]);
    // 1 (CT 2) and 3 (counter already at zero) arrive late: the change now sits on 1, the reset on 3.
    const result = await ingestRecords(testDb.db, [rec(3, 2, 5), rec(1, 2, 250), rec(1, 2, 250)]);
    expect(result).toEqual({ stored: 2, duplicates: 1, cleared: 0, quarantined: {} });
    expect(await flags()).toEqual([
      [0, false, false],
      [1, true, false],
      [2, false, false],
      [3, false, true],
      [4, false, false],
    ]);
  });

  it('flags a reset behind a stored record that read no counter', async () => {
    const dev = randomDeviceId();
    const sid = randomSid();
    const rec = (seq: number, doc: Record<string, unknown>) => parseRecord(dev, Buffer.from(JSON.stringify({ ...makeRecord(sid, seq, T0 + seq * 900), ...doc })), RECEIVED);
    await ingestRecords(testDb.db, [rec(0, { e: [100, 200] }), rec(1, { e: null })]);
    await ingestRecords(testDb.db, [rec(2, { e: [3, 50] })]);
    const listed = await list(dev, { start: String(T0), end: String(T0 + 7200) });
    expect(listed.records.map((r) => [r.seq, (r.flags as Record<string, boolean>).energy_reset])).toEqual([
      [0, false],
      [1, false],
      [2, true],
    ]);
  });

  it('judges again a reset behind stored records that read no counter when a late record lands before them', async () => {
    const dev = randomDeviceId();
    const sid = randomSid();
    const rec = (seq: number, doc: Record<string, unknown>) => parseRecord(dev, Buffer.from(JSON.stringify({ ...makeRecord(sid, seq, T0 + seq * 900), ...doc })), RECEIVED);
    await ingestRecords(testDb.db, [rec(1, { e: [100, 110] }), rec(3, { e: null }), rec(4, { e: [112, 120] })]);
    const resets = async () => (await list(dev, { start: String(T0), end: String(T0 + 7200) })).records.map((r) => [r.seq, (r.flags as Record<string, boolean>).energy_reset]);
    expect(await resets()).toEqual([
      [1, false],
      [3, false],
      [4, false],
    ]);
    // 2 arrives late and read the counter up to 115: 4 starting at 112 now went backwards.
    await ingestRecords(testDb.db, [rec(2, { e: [110, 115] })]);
    expect(await resets()).toEqual([
      [1, false],
      [2, false],
      [3, false],
      [4, true],
    ]);
  });

  it('keeps quarantined records with their reason and null stats, and keeps going after them', async () => {
    const quarantinedBefore = await quarantinedByReason();
    const dev = randomDeviceId();
    const sid = randomSid();
    await deviceSends(js, stream.prefix, dev, 'iv', 'not json at all\u0000', RECEIVED);
    await deviceSends(js, stream.prefix, dev, 'iv', { ...makeRecord(sid, 0, T0), ct: 0 }, RECEIVED);
    await deviceSends(js, stream.prefix, dev, 'iv', { ...makeRecord(sid, 1, T0 + 900), v: [-1, -2, -0.5] }, RECEIVED);
    await deviceSends(js, stream.prefix, dev, 'iv', { ...makeRecord(sid, 2, T0 + 1800), dur: 1e15 }, RECEIVED);
    await deviceSends(js, stream.prefix, dev, 'iv', makeRecord(sid, 3, T0 + 2700), RECEIVED);
    await deviceSends(js, stream.prefix, dev, 'tele.heartbeat', { uptime_s: 1 }, RECEIVED);
    await waitFor(async () => (await storedCount(dev)) === 5, { what: '5 records' });
    const body = await list(dev, { start: String(T0), end: String(T0 + 3600) });
    expect(body.records.map((r) => [r.seq, r.quarantined, r.quarantine_reason])).toEqual([
      [0, true, 'unusable_ct_turns'],
      [1, true, 'impossible_values'],
      [2, true, 'impossible_values'],
      [3, false, null],
    ]);
    expect(body.records[0]).toMatchObject({ ct_turns: null, voltage_v: null, power_w: null, energy_wh: null });
    // Counted by reason in the service's metrics (fleet_meter_records_quarantined_total).
    const quarantinedAfter = await quarantinedByReason();
    const added = (reason: string) => (quarantinedAfter[reason] ?? 0) - (quarantinedBefore[reason] ?? 0);
    expect([added('unusable_ct_turns'), added('impossible_values'), added('malformed_payload')]).toEqual([1, 2, 1]);
    // The payload that is no JSON is stored (5 rows above) but carries no identity: listed nowhere.
    expect((await list(dev, { unknown_time: 'true' })).records).toEqual([]);
    expect((await list(dev, { received_since: '2000-01-01T00:00:00Z' })).records.map((r) => r.seq).sort()).toEqual([0, 1, 2, 3]);
  });

  it('lists no payload without a usable sid and seq (the spec has no null for them); a record with them but no usable start is listed with unknown time', async () => {
    const dev = randomDeviceId();
    const sid = randomSid();
    const bookmark = (await list(dev, { received_since: '2000-01-01T00:00:00Z' })).next_cursor as string;
    await deviceSends(js, stream.prefix, dev, 'iv', '{not json', RECEIVED);
    await deviceSends(js, stream.prefix, dev, 'iv', { ...makeRecord(sid, 0, T0), sid: 'XYZ', seq: -1 }, RECEIVED);
    await deviceSends(js, stream.prefix, dev, 'iv', { ...makeRecord(sid, 0, T0), seq: undefined }, RECEIVED);
    await deviceSends(js, stream.prefix, dev, 'iv', { ...makeRecord(sid, 1, T0 + 900), start: 'yesterday' }, RECEIVED);
    await deviceSends(js, stream.prefix, dev, 'iv', makeRecord(sid, 2, T0 + 1800), RECEIVED);
    await waitFor(async () => (await storedCount(dev)) === 5, { what: '5 records stored' });
    const stored = await testDb.db.intervalRecord.findMany({ where: { deviceId: dev }, select: { quarantineReason: true } });
    expect(stored.map((r) => r.quarantineReason).sort()).toEqual(['invalid_identity', 'invalid_identity', 'malformed_fields', 'malformed_payload', null]);

    const unknown = await list(dev, { unknown_time: 'true' });
    expect(unknown.records).toHaveLength(1);
    expect(unknown.records[0]).toMatchObject({ sid, seq: 1, start_at: null, time_quality: 'unknown', quarantined: true, quarantine_reason: 'malformed_fields' });
    for (const query of [{ received_since: '2000-01-01T00:00:00Z' }, { cursor: bookmark }]) {
      const page = await list(dev, query);
      // (Two replicas ingest: the two records may have been stored in either order.)
      expect(page.records.map((r) => [r.sid, r.seq]).sort()).toEqual([[sid, 1], [sid, 2]]);
      for (const r of page.records) {
        expect(typeof r.seq).toBe('number');
        expect(r.sid).toMatch(/^[0-9a-f]{8}$/);
      }
    }
  });
});

describe('intervals', () => {
  const dev = randomDeviceId();
  const sid = randomSid();
  beforeAll(async () => {
    for (let s = 0; s < 25; s++) await deviceSends(js, stream.prefix, dev, 'iv', makeRecord(sid, s, T0 + s * 900, { e0: 1000 + s * 200 }), new Date(RECEIVED.getTime() + s * 1000));
    await waitFor(async () => (await storedCount(dev)) === 25, { what: '25 records' });
  });

  it('pages by start time with cursors that carry the window', async () => {
    const first = await list(dev, { start: new Date(T0 * 1000).toISOString(), end: String(T0 + 86_400), limit: '10' });
    expect(first.records).toHaveLength(10);
    expect(first.has_more).toBe(true);
    const second = await list(dev, { cursor: first.next_cursor, limit: '10' });
    const third = await list(dev, { cursor: second.next_cursor, limit: '10', end: String(T0 + 86_400) });
    expect(third.records).toHaveLength(5);
    expect(third.has_more).toBe(false);
    expect(third.next_cursor).toBeNull();
    expect([...first.records, ...second.records, ...third.records].map((r) => r.seq)).toEqual([...Array(25).keys()]);
    await expect(list(dev, { cursor: first.next_cursor, end: String(T0 + 86_401) })).rejects.toThrow("invalid 'end'");
    await expect(list(dev, { cursor: first.next_cursor, received_since: String(T0) })).rejects.toThrow('cannot be combined');
    await expect(list(randomDeviceId(), { cursor: first.next_cursor })).rejects.toThrow("invalid 'cursor'");
  });

  it('pages by arrival with a bookmark that is never null, and refuses one from another database', async () => {
    const a = await list(dev, { received_since: RECEIVED.toISOString(), limit: '20' });
    expect(a.mode).toBe('received');
    expect(a.records).toHaveLength(20);
    expect(a.has_more).toBe(true);
    const b = await list(dev, { cursor: a.next_cursor, limit: '20' });
    // Two replicas store concurrently: arrival order is the order the server stored them, every record exactly once.
    expect(b.records).toHaveLength(5);
    expect([...a.records, ...b.records].map((r) => r.seq).sort((x, y) => Number(x) - Number(y))).toEqual([...Array(25).keys()]);
    expect(b.received_since).toBeNull();
    expect(b.next_cursor).toEqual(expect.any(String));
    const c = await list(dev, { cursor: b.next_cursor });
    expect(c.records).toEqual([]);
    expect(c.next_cursor).toBe(b.next_cursor);
    const future = await list(dev, { received_since: '2030-01-01T00:00:00Z' });
    expect(future.records).toEqual([]);
    expect(future.next_cursor).toEqual(expect.any(String));
    // A bookmark from another database epoch, or beyond what this database holds, predates a restore.
    const raw = JSON.parse(Buffer.from(b.next_cursor as string, 'base64url').toString()) as Record<string, unknown>;
    const forged = (over: Record<string, unknown>) => Buffer.from(JSON.stringify({ ...raw, ...over })).toString('base64url');
    await expect(list(dev, { cursor: forged({ ep: 'another-epoch' }) })).rejects.toThrow("invalid 'cursor'");
    await expect(list(dev, { cursor: forged({ a: Number(raw.a) + 1_000_000 }) })).rejects.toThrow("invalid 'cursor'");
    await expect(list(dev, { cursor: b.next_cursor, start: String(T0) })).rejects.toThrow('cannot be combined');
  });

  it('refuses a light', async () => {
    await expect(listIntervals(testDb.db, envelope(dev, {}, {}, 'light'))).rejects.toThrow('Device not found');
  });
});

describe('summary and energy', () => {
  it('match values computed here, across the Berlin spring change, with resets and CT changes', async () => {
    const dev = randomDeviceId();
    const sidA = randomSid();
    const sidB = randomSid();
    // Hourly records from 2026-03-28T20:00Z for 30 hours; a CT change at 10, a reset at 20, a restart (new sid) at 15.
    const start = Date.parse('2026-03-28T20:00:00Z') / 1000;
    const sent: Array<ReturnType<typeof makeRecord>> = [];
    let counter = 5000;
    for (let h = 0; h < 30; h++) {
      const ct = h >= 10 ? 2 : 1;
      if (h === 20) counter = 0.5;
      const sid = h < 15 ? sidA : sidB;
      const rec = makeRecord(sid, h < 15 ? h : h - 15, start + h * 3600, { dur: 3600, w: 100 + h * 10, ct, e0: counter });
      counter = rec.e![1] + 0.05;
      sent.push(rec);
    }
    for (const r of sent) await deviceSends(js, stream.prefix, dev, 'iv', r, RECEIVED);
    await waitFor(async () => (await storedCount(dev)) === 30, { what: '30 records' });

    const windowStart = '2026-03-28T23:00:00Z'; // Berlin midnight (UTC+1)
    const windowEnd = '2026-03-30T22:00:00Z'; // Berlin midnight of the 31st (UTC+2)
    const energy = bodyOf(await getEnergy(testDb.db, envelope(dev, { bucket: 'day', tz: 'Europe/Berlin', start: windowStart, end: windowEnd }))) as {
      points: Array<{ start_at: string; energy_wh: number | null; reset: boolean }>;
      total: { energy_wh: number; resets: number; intervals: number; buckets: number } | null;
      tz: string;
    };
    // Independently: per record last - first over CT turns; Berlin day 29 is 23 hours long.
    const inWindow = (r: (typeof sent)[number]) => r.start! >= Date.parse(windowStart) / 1000 && r.start! < Date.parse(windowEnd) / 1000;
    const used = (r: (typeof sent)[number]) => (r.e![1] - r.e![0]) / r.ct;
    const day29End = Date.parse('2026-03-29T22:00:00Z') / 1000;
    const day29 = sent.filter((r) => inWindow(r) && r.start! < day29End);
    const day30 = sent.filter((r) => inWindow(r) && r.start! >= day29End);
    expect(day29).toHaveLength(23);
    const sum = (rs: typeof sent) => rs.reduce((a, r) => a + used(r), 0);
    expect(energy.tz).toBe('Europe/Berlin');
    expect(energy.points.map((p) => p.start_at)).toEqual(['2026-03-29T00:00:00+01:00', '2026-03-30T00:00:00+02:00']);
    expect(energy.points[0]?.energy_wh).toBeCloseTo(sum(day29), 5);
    expect(energy.points[1]?.energy_wh).toBeCloseTo(sum(day30), 5);
    expect(energy.points.map((p) => p.reset)).toEqual([true, false]);
    expect(energy.total).toEqual({ energy_wh: expect.any(Number), resets: 1, intervals: 27, buckets: 2 });
    expect(energy.total?.energy_wh).toBeCloseTo(sum([...day29, ...day30]), 5);

    const summary = (await getSummary(testDb.db, envelope(dev, { start: windowStart, end: windowEnd }))).body as { energy_wh: unknown; coverage: unknown; power_w: { avg: number; min: number; max: number } };
    expect(summary.energy_wh).toEqual({ total: energy.total?.energy_wh, resets: 1, intervals: 27 });
    const rs = [...day29, ...day30];
    const weighted = rs.reduce((a, r) => a + (r.p![0] / r.ct) * r.dur, 0) / rs.reduce((a, r) => a + r.dur, 0);
    expect(summary.power_w.avg).toBeCloseTo(weighted, 6);
    expect(summary.power_w.min).toBe(Math.min(...rs.map((r) => r.p![1] / r.ct)));
    expect(summary.power_w.max).toBe(Math.max(...rs.map((r) => r.p![2] / r.ct)));
    expect(summary.coverage).toEqual({ records: 27, quarantined: 0, seconds: 27 * 3600 });

    const empty = bodyOf(await getEnergy(testDb.db, envelope(dev, { start: '2020-01-01T00:00:00Z', end: '2020-01-02T00:00:00Z' })));
    expect(empty.total).toBeNull();
    expect((await getSummary(testDb.db, envelope(dev, { start: '2020-01-01T00:00:00Z', end: '2020-01-02T00:00:00Z' }))).body).toMatchObject({ energy_wh: null, voltage_v: null });
    await expect(getSummary(testDb.db, envelope(dev, { start: '2020-01-01T00:00:00Z', end: '2021-01-02T00:00:00Z' }))).rejects.toThrow('one year');
    await expect(getEnergy(testDb.db, envelope(dev, { start: '2020-01-01T00:00:00Z', end: '2021-01-02T00:00:00Z' }))).rejects.toThrow('buckets');
    await expect(getEnergy(testDb.db, envelope(dev, { tz: 'Not/AZone' }))).rejects.toThrow("invalid 'tz'");
  });
});

describe('clear after meter testing', () => {
  it('hides records in both modes, refuses records from before the clear, keeps bookmarks valid', async () => {
    const dev = randomDeviceId();
    const sid = randomSid();
    // A meter whose clock runs far behind ours (as a simulated one may): judged by its own time.
    const t0 = Date.parse('2026-01-01T00:00:00Z') / 1000;
    for (const s of [0, 1, 2, 4]) await deviceSends(js, stream.prefix, dev, 'iv', makeRecord(sid, s, t0 + s * 900));
    await waitFor(async () => (await storedCount(dev)) === 4, { what: '4 records' });
    const bookmark = (await list(dev, { received_since: '2000-01-01T00:00:00Z' })).next_cursor;
    const result = await clearDevice(testDb.db, dev);
    expect(result.cleared_records).toBe(4);
    expect((await list(dev, { start: String(t0 - 86_400), end: String(t0 + 86_400) })).records).toEqual([]);
    expect((await list(dev, { received_since: '2000-01-01T00:00:00Z' })).records).toEqual([]);
    // From before the clear: the late seq 3, a repeat of seq 2, a late record of an older stream.
    await deviceSends(js, stream.prefix, dev, 'iv', makeRecord(sid, 3, t0 + 3 * 900));
    await deviceSends(js, stream.prefix, dev, 'iv', makeRecord(sid, 2, t0 + 2 * 900));
    await deviceSends(js, stream.prefix, dev, 'iv', makeRecord(randomSid(), 7, t0 - 900));
    // After it: the next interval of the stream, and a new stream after a restart.
    const restarted = randomSid();
    await deviceSends(js, stream.prefix, dev, 'iv', makeRecord(sid, 5, t0 + 5 * 900));
    await deviceSends(js, stream.prefix, dev, 'iv', makeRecord(restarted, 0, t0 + 6 * 900));
    const after = await waitFor(async () => {
      const page = await list(dev, { cursor: bookmark });
      return page.records.length >= 2 ? page : undefined;
    }, { what: 'the records after the clear' });
    await new Promise((r) => setTimeout(r, 500));
    const all = await list(dev, { cursor: bookmark });
    expect(all.records.map((r) => `${String(r.sid)}/${String(r.seq)}`).sort()).toEqual([`${sid}/5`, `${restarted}/0`].sort());
    expect(after.next_cursor).toEqual(expect.any(String));
    expect(await storedCount(dev)).toBe(6);
  });

  it('refuses what the meter made before the clear and sent after it (offline meanwhile), judged by its own clock', async () => {
    const T = Date.parse('2026-06-01T12:00:00Z') / 1000;
    const at = (s: number): Date => new Date(s * 1000);
    const dev = randomDeviceId();
    const sid = randomSid();
    // The meter's clock runs 600 s behind ours; a record reaches us 2 s after it ends.
    const reached = (startS: number) => at(startS + 900 + 600 + 2);
    await ingestRecords(testDb.db, [parseRecord(dev, Buffer.from(JSON.stringify(makeRecord(sid, 0, T))), reached(T))]);
    await clearDevice(testDb.db, dev, at(T + 3000));
    const mark = await testDb.db.meterClear.findFirst({ where: { deviceId: dev }, orderBy: { id: 'desc' } });
    // Our 3000 s is the meter's 2398 s: its record of 900 s ended at its 900 s, which reached us at our 1502 s.
    expect(mark?.meterClockAtClear).toEqual(at(T + 2398));
    // Back online after the clear, the meter sends what it made meanwhile.
    const later = [1, 2, 3].map((seq) => parseRecord(dev, Buffer.from(JSON.stringify(makeRecord(sid, seq, T + seq * 900))), at(T + 4000)));
    expect(await ingestRecords(testDb.db, later)).toEqual({ stored: 2, duplicates: 0, cleared: 1, quarantined: {} });
    const kept = (await testDb.db.intervalRecord.findMany({ where: { deviceId: dev, cleared: false }, orderBy: { seq: 'asc' } })).map((r) => Number(r.seq));
    // 1 ended (meter clock 1800) before the clear (2398); 2 was running at it; 3 came after.
    expect(kept).toEqual([2, 3]);
  });

  describe('with a start the platform did not accept', () => {
    const T = Date.parse('2026-06-01T12:00:00Z') / 1000;
    const at = (s: number): Date => new Date(s * 1000);
    const parsedAt = (dev: string, payload: object, receivedS: number) => parseRecord(dev, Buffer.from(JSON.stringify(payload)), at(receivedS));
    const markOf = async (dev: string): Promise<Date | null> =>
      (await testDb.db.meterClear.findFirst({ where: { deviceId: dev }, orderBy: [{ clearedAt: 'desc' }, { id: 'desc' }] }))?.maxStartAt ?? null;
    const storedKeys = async (dev: string): Promise<string[]> =>
      (await testDb.db.intervalRecord.findMany({ where: { deviceId: dev, cleared: false } })).map((r) => `${r.sid}/${r.seq}`).sort();

    /** Two accepted records, one dated 2096 (start_in_future), one of another stream dated 2093 and quarantined first for its CT turns. */
    async function meterWithFarStarts(dev: string, sid: string): Promise<void> {
      const result = await ingestRecords(testDb.db, [
        parsedAt(dev, makeRecord(sid, 0, T), T + 1800),
        parsedAt(dev, makeRecord(sid, 1, T + 900), T + 1800),
        parsedAt(dev, makeRecord(sid, 2, 4_000_000_000), T + 1800),
        parsedAt(dev, { ...makeRecord(randomSid(), 0, 3_900_000_000), ct: 0 }, T + 1800),
      ]);
      expect(result).toEqual({ stored: 4, duplicates: 0, cleared: 0, quarantined: { start_in_future: 1, unusable_ct_turns: 1 } });
    }

    it('marks the clear by the newest accepted start, so what the meter sends after the clear is stored', async () => {
      const dev = randomDeviceId();
      const sid = randomSid();
      await meterWithFarStarts(dev, sid);
      await clearDevice(testDb.db, dev, at(T + 1900));
      expect(await markOf(dev)).toEqual(at(T + 900));
      const restarted = randomSid();
      const result = await ingestRecords(testDb.db, [
        parsedAt(dev, makeRecord(sid, 3, T + 1800), T + 2800), // the stream's next interval
        parsedAt(dev, makeRecord(restarted, 0, T + 2700), T + 3700), // a new stream after a restart
        parsedAt(dev, makeRecord(sid, 1, T + 900), T + 2800), // a repeat from before the clear
        parsedAt(dev, makeRecord(randomSid(), 4, T - 900), T + 2800), // an unknown stream's record from before it
      ]);
      expect(result).toEqual({ stored: 2, duplicates: 0, cleared: 2, quarantined: {} });
      expect(await storedKeys(dev)).toEqual([`${sid}/3`, `${restarted}/0`].sort());
      const page = await list(dev, { start: String(T - 86_400), end: String(T + 86_400) });
      expect(page.records.map((r) => `${String(r.sid)}/${String(r.seq)}`).sort()).toEqual([`${sid}/3`, `${restarted}/0`].sort());
    });

    it("recomputes a latest clear's mark that a quarantined start moved, from the records that clear covered", async () => {
      const migration = fs.readFileSync(path.join(MIGRATIONS_DIR, '20261201000000_clear_marks_accepted_starts', 'migration.sql'), 'utf8');
      const poisoned = randomDeviceId();
      const sid = randomSid();
      await meterWithFarStarts(poisoned, sid);
      await clearDevice(testDb.db, poisoned, at(T + 1900));
      // As a clear made before stored it: the newest start of every record, the quarantined 2096 one included.
      await testDb.db.meterClear.updateMany({ where: { deviceId: poisoned }, data: { maxStartAt: at(4_000_000_000) } });
      expect(await ingestRecords(testDb.db, [parsedAt(poisoned, makeRecord(sid, 3, T + 1800), T + 2800)])).toEqual({ stored: 0, duplicates: 0, cleared: 1 });
      // A meter cleared earlier, then cleared again, and sending since: only its latest mark is read, and
      // the records stored after that clear (not cleared) are not part of it.
      const other = randomDeviceId();
      const otherSid = randomSid();
      await ingestRecords(testDb.db, [parsedAt(other, makeRecord(otherSid, 0, T), T + 900)]);
      await clearDevice(testDb.db, other, at(T + 1000));
      await ingestRecords(testDb.db, [parsedAt(other, makeRecord(otherSid, 1, T + 900), T + 1800)]);
      await clearDevice(testDb.db, other, at(T + 1900));
      await ingestRecords(testDb.db, [parsedAt(other, makeRecord(otherSid, 2, T + 1800), T + 2700)]);

      await testDb.db.$executeRawUnsafe(migration);
      expect(await markOf(poisoned)).toEqual(at(T + 900));
      expect(await markOf(other)).toEqual(at(T + 900));
      expect(await ingestRecords(testDb.db, [parsedAt(poisoned, makeRecord(sid, 4, T + 2700), T + 3700)])).toEqual({ stored: 1, duplicates: 0, cleared: 0, quarantined: {} });
      expect(await storedKeys(poisoned)).toEqual([`${sid}/4`]);
    });
  });
});
