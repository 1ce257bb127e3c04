/**
 * The meter's partner events on real NATS, JetStream and Postgres: each change writes its event
 * to the outbox in its own transaction (meter.records_stored per device and batch,
 * meter.sample_settled, meter.energy_reset_settled), exactly once from committed state: a
 * redelivered message that changes nothing writes none, a rolled-back change leaves none. The
 * relay to PARTNER_EVENTS: outbox-relay.integration.test.ts.
 */
import type { JetStreamClient } from 'nats';
import type { RequestEnvelope } from '@fleet/contracts';
import { BridgeClient } from '@fleet/bridge-client';
import { RegistryClient } from '@fleet/registry-client';
import { DurablePullConsumer, type Bus } from '@fleet/service-kit';
import { BridgeStandIn, randomDeviceId, RegistryStandIn, uniqueId, waitFor } from '@fleet/test-kit';
import { parseRecord } from '../src/domain/record';
import { newToken, SAMPLE_TIMEOUT_S } from '../src/domain/requests';
import { deviceInProcessor } from '../src/handlers/device-in';
import { listIntervals } from '../src/handlers/reads';
import { getReset, getSample, requestReset, requestSample, type RequestDeps } from '../src/handlers/requests';
import { SampleSweep } from '../src/handlers/sample-sweep';
import { ingestRecords } from '../src/store/ingest';
import { createSample, readSample, settleExpiredSamples, settleReset, settleSample } from '../src/store/requests';
import { bodyOf, connectBus, createStream, createTestDb, deviceSends, envelope, inTime, logger, makeRecord, randomSid, type TestDb } from './support';

let testDb: TestDb;
let bus: Bus;
let js: JetStreamClient;
let stream: Awaited<ReturnType<typeof createStream>>;
let consumer: DurablePullConsumer;
let deps: RequestDeps;
let bridge: BridgeStandIn;
let registry: RegistryStandIn;
let woken = 0;
let durable: string;

/** Waits until the consumer has handled (acknowledged) every message in the stream so far. */
async function handledAll(): Promise<void> {
  const jsm = await bus.connection.jetstreamManager();
  await waitFor(
    async () => {
      const info = await jsm.consumers.info(stream.name, durable);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    },
    { what: 'the consumer to handle every message' },
  );
}

beforeAll(async () => {
  testDb = await createTestDb();
  const id = uniqueId('mev');
  bus = await connectBus(uniqueId('meter-events-'), `${id}.`);
  stream = await createStream(bus.connection, id);
  js = bus.connection.jetstream();
  bridge = new BridgeStandIn(bus.connection, { prefix: stream.prefix });
  registry = new RegistryStandIn(bus.connection, { prefix: stream.prefix });
  deps = {
    db: testDb.db,
    bridge: new BridgeClient(bus, { timeoutMs: 2000, logger }),
    registry: new RegistryClient(bus, { timeoutMs: 2000, logger }),
    topicRoot: 'meter',
    onEvents: () => void woken++,
  };
  durable = uniqueId('meter-events-ingest-');
  consumer = new DurablePullConsumer(bus.connection, {
    stream: stream.name,
    durable,
    filterSubject: `${stream.prefix}dev.in.meter.>`,
    batch: 50,
    ackWaitS: 30,
    process: deviceInProcessor(testDb.db, stream.prefix, logger, () => void woken++),
    logger,
  });
  consumer.start();
});

afterAll(async () => {
  bridge?.close();
  registry?.close();
  await consumer?.stop();
  await stream?.drop();
  await bus?.drain();
  await testDb?.drop();
});

interface PartnerEvent {
  id: string;
  type: string;
  version: number;
  occurred_at: string;
  device_id?: string;
  data: Record<string, unknown>;
}

/** The events of a type about a device in the outbox, oldest first, with their subjects checked. */
async function eventsOf(type: string, deviceId: string): Promise<PartnerEvent[]> {
  const rows = await testDb.db.$queryRawUnsafe<Array<{ subject: string; payload: { event: PartnerEvent } }>>(
    `SELECT subject, payload FROM outbox_events WHERE payload->'event'->>'type' = $1 AND payload->'event'->>'device_id' = $2 ORDER BY id`,
    type,
    deviceId,
  );
  for (const row of rows) expect(row.subject).toBe(`evt.partner.${type}.v1`);
  return rows.map((r) => r.payload.event);
}

const T0 = Date.parse('2026-04-01T00:00:00Z') / 1000;
const RECEIVED = new Date('2026-06-01T00:00:00Z');
const parsed = (deviceId: string, sid: string, seq: number) => parseRecord(deviceId, Buffer.from(JSON.stringify(makeRecord(sid, seq, T0 + seq * 900))), RECEIVED);

type Page = { records: Array<{ sid: string; seq: number }>; has_more: boolean };
/** What a partner gets for an event's cursor and count. */
async function listed(deviceId: string, data: Record<string, unknown>): Promise<string[]> {
  const body = bodyOf(await listIntervals(testDb.db, envelope(deviceId, { cursor: data.cursor, limit: String(data.count) }))) as unknown as Page;
  return body.records.map((r) => `${r.sid}/${r.seq}`);
}
const keys = (sid: string, seqs: number[]): string[] => seqs.map((s) => `${sid}/${s}`);
const near = (iso: string, from: number): boolean => Date.parse(iso) >= from - 1000 && Date.parse(iso) <= Date.now() + 1000;

describe('meter.records_stored', () => {
  it('is one event per device and batch, counting only new records; cursor and count list exactly them', async () => {
    const a = randomDeviceId();
    const b = randomDeviceId();
    const sa = randomSid();
    const sb = randomSid();
    const t = Date.now();
    // One batch, two devices, records interleaved, one repeated inside the batch.
    await ingestRecords(testDb.db, [parsed(a, sa, 0), parsed(b, sb, 0), parsed(a, sa, 1), parsed(b, sb, 1), parsed(a, sa, 2), parsed(a, sa, 1)]);
    const [ea] = await eventsOf('meter.records_stored', a);
    const [eb] = await eventsOf('meter.records_stored', b);
    expect(ea).toMatchObject({ type: 'meter.records_stored', version: 1, device_id: a, data: { count: 3, cursor: expect.any(String) } });
    expect(eb).toMatchObject({ device_id: b, data: { count: 2 } });
    expect(near(ea!.occurred_at, t)).toBe(true);
    expect(await listed(a, ea!.data)).toEqual(keys(sa, [0, 1, 2]));
    expect(await listed(b, eb!.data)).toEqual(keys(sb, [0, 1]));

    // Partly known: only the new record counts; wholly known (a redelivery): no event at all.
    await ingestRecords(testDb.db, [parsed(a, sa, 1), parsed(a, sa, 3), parsed(a, sa, 2)]);
    expect(await ingestRecords(testDb.db, [parsed(a, sa, 0), parsed(a, sa, 3)])).toMatchObject({ stored: 0, duplicates: 2 });
    const events = await eventsOf('meter.records_stored', a);
    expect(events.map((e) => e.data.count)).toEqual([3, 1]);
    expect(await listed(a, events[1]!.data)).toEqual(keys(sa, [3]));
    // The first event's cursor still lists exactly its batch, though more arrived after it.
    expect(await listed(a, events[0]!.data)).toEqual(keys(sa, [0, 1, 2]));
  });

  it('stays exact when batches of several replicas commit at the same time', async () => {
    const devices = [randomDeviceId(), randomDeviceId()];
    const sids = devices.map(() => randomSid());
    // Eight concurrent batches, each with records of both devices (as replicas sharing the consumer).
    const batches = Array.from({ length: 8 }, (_, n) =>
      devices.flatMap((d, i) => Array.from({ length: 5 }, (_, k) => parsed(d, sids[i] as string, n * 5 + k))),
    );
    await Promise.all(batches.map((batch) => ingestRecords(testDb.db, batch)));
    for (const [i, d] of devices.entries()) {
      const events = await eventsOf('meter.records_stored', d);
      expect(events).toHaveLength(8);
      const lists = await Promise.all(events.map((e) => listed(d, e.data)));
      // Each event lists exactly one batch's records of the device; together every record once.
      for (const [n, list] of lists.entries()) {
        expect(list).toHaveLength(events[n]!.data.count as number);
        const batch = Math.floor(Number(list[0]!.split('/')[1]) / 5);
        expect(list).toEqual(keys(sids[i] as string, [0, 1, 2, 3, 4].map((k) => batch * 5 + k)));
      }
      expect(lists.flat().sort()).toEqual(keys(sids[i] as string, Array.from({ length: 40 }, (_, k) => k)).sort());
    }
  });

  it('splits a device’s batch into events of at most 1000 records (a page’s limit)', async () => {
    const d = randomDeviceId();
    const sid = randomSid();
    await ingestRecords(testDb.db, Array.from({ length: 1203 }, (_, seq) => parsed(d, sid, seq)));
    const events = await eventsOf('meter.records_stored', d);
    expect(events.map((e) => e.data.count)).toEqual([1000, 203]);
    const lists = await Promise.all(events.map((e) => listed(d, e.data)));
    expect(lists[0]).toHaveLength(1000);
    expect([...(lists[0] as string[]), ...(lists[1] as string[])]).toEqual(keys(sid, Array.from({ length: 1203 }, (_, k) => k)));
  });

  it('counts no record without identity (never listed): cursor and count still list exactly the batch’s records', async () => {
    const d = randomDeviceId();
    const sid = randomSid();
    const unidentified = (text: string) => parseRecord(d, Buffer.from(text), RECEIVED);
    // Listed records with records without identity before, between and after them, over 1000 listed ones.
    const batch = [
      unidentified('{not json'),
      ...Array.from({ length: 1000 }, (_, seq) => parsed(d, sid, seq)),
      unidentified('{"sid":"XYZ","seq":-1}'),
      parsed(d, sid, 1000),
      unidentified('{"seq":3}'),
      parsed(d, sid, 1001),
    ];
    expect(await ingestRecords(testDb.db, batch)).toMatchObject({ stored: 1005, duplicates: 0 });
    const events = await eventsOf('meter.records_stored', d);
    expect(events.map((e) => e.data.count)).toEqual([1000, 2]);
    const lists = await Promise.all(events.map((e) => listed(d, e.data)));
    expect(lists[0]).toEqual(keys(sid, Array.from({ length: 1000 }, (_, k) => k)));
    expect(lists[1]).toEqual(keys(sid, [1000, 1001]));
    // A batch of nothing but records without identity stores them and announces nothing.
    expect(await ingestRecords(testDb.db, [unidentified('still not json')])).toMatchObject({ stored: 1 });
    expect(await eventsOf('meter.records_stored', d)).toHaveLength(2);
    expect(await testDb.db.intervalRecord.count({ where: { deviceId: d } })).toBe(1006);
  });

  it('leaves neither records nor an event when the batch’s transaction rolls back', async () => {
    const d = randomDeviceId();
    // The outbox refuses this device's event: the batch's transaction fails after its records went in.
    await testDb.db.$executeRawUnsafe(`CREATE FUNCTION refuse_event() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.payload->'event'->>'device_id' = '${d}' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$`);
    await testDb.db.$executeRawUnsafe('CREATE TRIGGER refuse_event BEFORE INSERT ON outbox_events FOR EACH ROW EXECUTE FUNCTION refuse_event()');
    try {
      await expect(ingestRecords(testDb.db, [parsed(d, randomSid(), 0)])).rejects.toThrow();
    } finally {
      await testDb.db.$executeRawUnsafe('DROP TRIGGER refuse_event ON outbox_events');
      await testDb.db.$executeRawUnsafe('DROP FUNCTION refuse_event()');
    }
    expect(await testDb.db.intervalRecord.count({ where: { deviceId: d } })).toBe(0);
    expect(await eventsOf('meter.records_stored', d)).toEqual([]);
  });

  it('through DEVICE_IN: a batch delivered again adds no event', async () => {
    const d = randomDeviceId();
    const sid = randomSid();
    const before = woken;
    for (const seq of [0, 1, 2]) await deviceSends(js, stream.prefix, d, 'iv', makeRecord(sid, seq, T0 + seq * 900), RECEIVED);
    await waitFor(async () => (await eventsOf('meter.records_stored', d)).reduce((n, e) => n + (e.data.count as number), 0) === 3, { what: 'records_stored of 3 records' });
    expect(woken).toBeGreaterThan(before);
    // The same three again (as after a redelivery), then one new record.
    for (const seq of [0, 1, 2, 3]) await deviceSends(js, stream.prefix, d, 'iv', makeRecord(sid, seq, T0 + seq * 900), RECEIVED);
    await handledAll();
    expect(await testDb.db.intervalRecord.count({ where: { deviceId: d } })).toBe(4);
    const events = await eventsOf('meter.records_stored', d);
    expect(events.reduce((n, e) => n + (e.data.count as number), 0)).toBe(4);
    const lists = await Promise.all(events.map((e) => listed(d, e.data)));
    expect(lists.flat()).toEqual(keys(sid, [0, 1, 2, 3]));
    expect(lists.at(-1)).toEqual(keys(sid, [3]));
  });
});

const withToken = (deviceId: string, token: string): RequestEnvelope => envelope(deviceId, {}, { params: { device_id: deviceId, token } });
const sampleBody = async (deviceId: string, token: string) => (await getSample(deps, withToken(deviceId, token), inTime())).body as Record<string, unknown>;
const resetBody = async (deviceId: string, token: string) => (await getReset(deps, withToken(deviceId, token))).body as Record<string, unknown>;

function online(deviceId: string): void {
  registry.connectivity.set(deviceId, { status: 'connected', status_changed_at: '2026-06-01T00:00:00.000Z', last_seen_at: '2026-06-01T00:01:00.000Z' });
}

async function askSample(deviceId: string): Promise<string> {
  online(deviceId);
  return ((await requestSample(deps, envelope(deviceId), logger)).body as { token: string }).token;
}

describe('meter.sample_settled', () => {
  it('carries the request as GET answers it when the live answer settles it done, once', async () => {
    const d = randomDeviceId();
    const token = await askSample(d);
    expect(await eventsOf('meter.sample_settled', d)).toEqual([]);
    const answer = { token, link: 'ok', v: 230.2, i: 2.6, p: 580, pf: 0.97, f: 50, ct: 2, age_s: 0.4 };
    await deviceSends(js, stream.prefix, d, 'live', answer);
    const [event] = await waitFor(async () => ((await eventsOf('meter.sample_settled', d)).length ? eventsOf('meter.sample_settled', d) : undefined), { what: 'sample_settled' });
    const body = await sampleBody(d, token);
    expect(body).toMatchObject({ state: 'done', reading: { power_w: 290 } });
    expect(event).toMatchObject({ type: 'meter.sample_settled', version: 1, device_id: d, data: body });
    expect(event!.data).toEqual(body);
    // The same answer again (a redelivery) settles nothing and adds no event.
    expect(await settleSample(testDb.db, d, token, { state: 'failed', reason: 'busy' }, new Date())).toBe(false);
    await deviceSends(js, stream.prefix, d, 'live', answer);
    await deviceSends(js, stream.prefix, d, 'sys.resp', `sample>token=${token}>failed`);
    await handledAll();
    expect(await eventsOf('meter.sample_settled', d)).toHaveLength(1);
    expect(await sampleBody(d, token)).toEqual(body);
  });

  it('carries failed with the meter’s reason', async () => {
    const d = randomDeviceId();
    const token = await askSample(d);
    await deviceSends(js, stream.prefix, d, 'live', { token, error: 'busy' });
    const [event] = await waitFor(async () => ((await eventsOf('meter.sample_settled', d)).length ? eventsOf('meter.sample_settled', d) : undefined), { what: 'sample_settled' });
    const body = await sampleBody(d, token);
    expect(body).toMatchObject({ state: 'failed', reason: 'busy', reading: null });
    expect(event!.data).toEqual(body);
  });

  it('is written by the sweep for no_reply when nobody reads; concurrent sweeps settle each request once', async () => {
    const devices = Array.from({ length: 6 }, () => randomDeviceId());
    const past = new Date(Date.now() - (SAMPLE_TIMEOUT_S + 5) * 1000);
    const tokens = devices.map(() => newToken('s'));
    for (const [i, d] of devices.entries()) await createSample(testDb.db, tokens[i] as string, d, past);
    // One still inside its deadline: left pending.
    const fresh = randomDeviceId();
    const freshToken = newToken('s');
    await createSample(testDb.db, freshToken, fresh, new Date());
    const t = Date.now();
    const counts = await Promise.all([settleExpiredSamples(testDb.db), settleExpiredSamples(testDb.db), settleExpiredSamples(testDb.db)]);
    expect(counts.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(devices.length);
    for (const [i, d] of devices.entries()) {
      const events = await eventsOf('meter.sample_settled', d);
      expect(events).toHaveLength(1);
      const body = await sampleBody(d, tokens[i] as string);
      expect(body).toMatchObject({ state: 'no_reply', reason: null, reading: null });
      expect(events[0]).toMatchObject({ device_id: d, data: body });
      expect(events[0]!.data).toEqual(body);
      expect(near(events[0]!.occurred_at, t)).toBe(true);
    }
    expect(await eventsOf('meter.sample_settled', fresh)).toEqual([]);
    expect(await sampleBody(fresh, freshToken)).toMatchObject({ state: 'pending' });
    // Nothing left: another sweep settles nothing; a late answer changes nothing.
    expect(await settleExpiredSamples(testDb.db)).toBe(0);
    expect(await settleSample(testDb.db, devices[0] as string, tokens[0] as string, { state: 'failed', reason: 'busy' }, past)).toBe(false);
    expect(await eventsOf('meter.sample_settled', devices[0] as string)).toHaveLength(1);
  });

  it('the service’s periodic sweep settles expired requests by itself', async () => {
    const d = randomDeviceId();
    const token = newToken('s');
    await createSample(testDb.db, token, d, new Date(Date.now() - (SAMPLE_TIMEOUT_S + 1) * 1000));
    let told = 0;
    const sweep = new SampleSweep(testDb.db, 100, logger, () => void told++);
    sweep.start();
    try {
      const [event] = await waitFor(async () => ((await eventsOf('meter.sample_settled', d)).length ? eventsOf('meter.sample_settled', d) : undefined), { what: 'the sweep' });
      expect(event!.data).toEqual(await sampleBody(d, token));
      expect(told).toBeGreaterThan(0);
    } finally {
      await sweep.stop();
    }
  });

  it('is written when a read past the deadline settles no_reply, and the sweep adds none', async () => {
    const d = randomDeviceId();
    const token = await askSample(d);
    // A read at the deadline: still pending, nothing written.
    expect(await readSample(testDb.db, d, token, inTime(), new Date(Date.now() + 1000))).toMatchObject({ view: { state: 'pending' }, settled: false });
    const later = new Date(Date.now() + (SAMPLE_TIMEOUT_S + 1) * 1000);
    const read = await readSample(testDb.db, d, token, inTime(), later);
    expect(read).toMatchObject({ view: { state: 'no_reply' }, settled: true });
    // (Earlier tests' pending requests are past `later` too: only this one's events count here.)
    await settleExpiredSamples(testDb.db, later);
    const events = await eventsOf('meter.sample_settled', d);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toEqual(read!.view);
    expect(events[0]!.data).toEqual(await sampleBody(d, token));
  });

  it('GET past the deadline settles no_reply with its event and tells the relay, once', async () => {
    const d = randomDeviceId();
    const token = newToken('s');
    await createSample(testDb.db, token, d, new Date(Date.now() - (SAMPLE_TIMEOUT_S + 1) * 1000));
    let told = 0;
    const get = async () => (await getSample({ ...deps, onEvents: () => void told++ }, withToken(d, token), inTime())).body as Record<string, unknown>;
    const body = await get();
    expect(body).toMatchObject({ state: 'no_reply' });
    expect(told).toBe(1);
    expect(await get()).toEqual(body);
    expect(told).toBe(1);
    const events = await eventsOf('meter.sample_settled', d);
    expect(events.map((e) => e.data)).toEqual([body]);
  });

  it('is not written when the read’s transaction does not commit (deadline passed, caller gone)', async () => {
    const d = randomDeviceId();
    const token = newToken('s');
    await createSample(testDb.db, token, d, new Date(Date.now() - (SAMPLE_TIMEOUT_S + 1) * 1000));
    await expect(readSample(testDb.db, d, token, { deadline: Date.now() - 1 })).rejects.toThrow(/deadline/);
    // The commit refused at the deadline: the change and its event roll back together.
    await expect(
      readSample(testDb.db, d, token, {
        deadline: Date.now() + 5_000,
        beforeCommit: async () => {
          throw new Error('the caller stopped waiting');
        },
      }),
    ).rejects.toThrow(/stopped waiting/);
    expect(await eventsOf('meter.sample_settled', d)).toEqual([]);
    expect((await testDb.db.sampleRequest.findUnique({ where: { token } }))?.state).toBe('pending');
  });
});

async function askReset(deviceId: string): Promise<string> {
  return ((await requestReset(deps, envelope(deviceId, {}, { body: { confirm: deviceId } }), logger)).body as { token: string }).token;
}

describe('meter.energy_reset_settled', () => {
  it.each([
    ['ok', 'done'],
    ['duplicate', 'duplicate'],
    ['failed:counter locked', 'failed'],
  ])('carries the request as GET answers it when the meter answers %s', async (answer, state) => {
    const d = randomDeviceId();
    const token = await askReset(d);
    // An unmatched rejection is noted on the pending request: no event, and the settled document carries it.
    await deviceSends(js, stream.prefix, d, 'sys.resp', 'resetenergy>>failed:unreadable token');
    await waitFor(async () => (await resetBody(d, token)).unmatched_rejection !== null, { what: 'unmatched rejection' });
    expect(await eventsOf('meter.energy_reset_settled', d)).toEqual([]);
    await deviceSends(js, stream.prefix, d, 'sys.resp', `resetenergy>token=${token}>${answer}`);
    const [event] = await waitFor(async () => ((await eventsOf('meter.energy_reset_settled', d)).length ? eventsOf('meter.energy_reset_settled', d) : undefined), { what: 'energy_reset_settled' });
    const body = await resetBody(d, token);
    expect(body).toMatchObject({ state, unmatched_rejection: { reason: 'unreadable token' } });
    expect(event).toMatchObject({ type: 'meter.energy_reset_settled', version: 1, device_id: d, data: body });
    expect(event!.data).toEqual(body);
    expect(event!.occurred_at).toBe(body.at);
    // The acknowledgement again changes nothing and adds no event.
    expect(await settleReset(testDb.db, d, token, 'ok', null, new Date())).toBe(false);
    expect(await eventsOf('meter.energy_reset_settled', d)).toHaveLength(1);
  });
});
