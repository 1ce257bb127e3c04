/**
 * Connectivity batches and telemetry taken from real JetStream streams (unique names, on a
 * private nats-server) into a real Postgres database; the silence sweep and telemetry retention.
 */
import { headers, JSONCodec, RetentionPolicy, StorageType, type JetStreamClient, type NatsConnection } from 'nats';
import { randomDeviceId, uniqueId, waitFor } from '@fleet/test-kit';
import { connectivityConsumer } from '../src/handlers/connectivity-consumer';
import type { DurablePullConsumer } from '@fleet/service-kit';
import { telemetryConsumer } from '../src/handlers/telemetry-consumer';
import { disconnectSilent } from '../src/store/connectivity';
import { insertDevice } from '../src/store/devices';
import { purgeTelemetry } from '../src/store/telemetry';
import { connectBus, createTestDb, logger, startPrivateNats, type PrivateNats, type TestDb } from './support';
import type { Bus } from '@fleet/service-kit';

let nats: PrivateNats;
let testDb: TestDb;
let bus: Bus;
let nc: NatsConnection;
let js: JetStreamClient;
const workers: DurablePullConsumer[] = [];
const id = uniqueId('c');
const names = {
  events: `DEVICE_EVENTS_${id}`,
  eventsSubject: `evt.bridge.${id}.connectivity.batch`,
  deviceIn: `DEVICE_IN_${id}`,
};

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  bus = await connectBus(nats.url);
  nc = bus.connection;
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add({ name: names.events, subjects: [`evt.bridge.${id}.>`], storage: StorageType.File, retention: RetentionPolicy.Limits });
  await jsm.streams.add({ name: names.deviceIn, subjects: ['dev.in.>', 'dev.out.>'], storage: StorageType.File });
  js = nc.jetstream();
});

afterAll(async () => {
  for (const w of workers) await w.stop();
  await bus?.drain();
  await testDb?.drop();
  await nats?.stop();
});

/** Reports and telemetry from before a record was created are ignored: by default the record predates every time used here. */
const LONG_AGO = new Date(Date.UTC(2020, 0, 1));

async function newDevice(product: 'light' | 'meter' = 'light', createdAt: Date | null = LONG_AGO): Promise<string> {
  const deviceId = randomDeviceId();
  await insertDevice(testDb.db, { deviceId, product, name: null, orgNodeId: 1, credentialSource: 'generate', settingsKeyCiphertext: null, brokerPasswordHash: null });
  if (createdAt) await testDb.db.device.update({ where: { deviceId }, data: { createdAt } });
  return deviceId;
}

const state = (deviceId: string) =>
  testDb.db.device.findUniqueOrThrow({ where: { deviceId }, select: { status: true, statusChangedAt: true, lastSeenAt: true } });

/** The partner events waiting in the outbox for a device, oldest first. */
async function partnerEventsOf(deviceId: string): Promise<Array<{ type: string; status_changed_at: string; org_node_ids: number[] }>> {
  const rows = await testDb.db.outboxEvent.findMany({ where: { subject: { startsWith: 'evt.partner.' } }, orderBy: { id: 'asc' } });
  return rows
    .map((r) => r.payload as { event: { type: string; device_id: string; data: { status_changed_at: string } }; org_node_ids: number[] })
    .filter((m) => m.event.device_id === deviceId)
    .map((m) => ({ type: m.event.type, status_changed_at: m.event.data.status_changed_at, org_node_ids: m.org_node_ids }));
}

const at = (offsetMs: number) => new Date(Date.UTC(2026, 10, 22, 9, 0, 0) + offsetMs);

async function publishBatch(events: { device_id: string; kind: 'seen' | 'offline'; at: Date; product?: string }[]): Promise<void> {
  await js.publish(
    names.eventsSubject,
    JSONCodec().encode({ events: events.map((e) => ({ device_id: e.device_id, product: e.product ?? 'light', kind: e.kind, at: e.at.toISOString() })) }),
  );
}

describe('connectivity batches from DEVICE_EVENTS', () => {
  beforeAll(() => {
    const w = connectivityConsumer(nc, testDb.db, { stream: names.events, durable: `registry-connectivity-${id}`, subject: names.eventsSubject }, logger);
    // Two replicas share the durable consumer.
    const w2 = connectivityConsumer(nc, testDb.db, { stream: names.events, durable: `registry-connectivity-${id}`, subject: names.eventsSubject }, logger);
    workers.push(w, w2);
    w.start();
    w2.start();
  });

  it('seen connects and sets last_seen_at; the last will disconnects at its time; unknown ids are ignored', async () => {
    const a = await newDevice();
    const b = await newDevice('meter');
    await publishBatch([
      { device_id: a, kind: 'seen', at: at(1000) },
      { device_id: b, kind: 'seen', at: at(1500), product: 'meter' },
      { device_id: randomDeviceId(), kind: 'seen', at: at(1500) },
    ]);
    await waitFor(async () => (await state(b)).status === 'connected', { what: 'b connected' });
    expect(await state(a)).toEqual({ status: 'connected', statusChangedAt: at(1000), lastSeenAt: at(1000) });
    expect(await state(b)).toEqual({ status: 'connected', statusChangedAt: at(1500), lastSeenAt: at(1500) });

    // Later traffic moves last_seen_at only; then the will disconnects a.
    await publishBatch([{ device_id: a, kind: 'seen', at: at(5000) }]);
    await waitFor(async () => (await state(a)).lastSeenAt?.getTime() === at(5000).getTime(), { what: 'a seen later' });
    expect((await state(a)).statusChangedAt).toEqual(at(1000));
    await publishBatch([{ device_id: a, kind: 'offline', at: at(9000) }]);
    await waitFor(async () => (await state(a)).status === 'disconnected', { what: 'a disconnected' });
    expect(await state(a)).toEqual({ status: 'disconnected', statusChangedAt: at(9000), lastSeenAt: at(5000) });

    // A will older than the latest traffic does not disconnect (the device came back).
    await publishBatch([
      { device_id: b, kind: 'seen', at: at(20_000), product: 'meter' },
      { device_id: b, kind: 'offline', at: at(10_000), product: 'meter' },
    ]);
    await waitFor(async () => (await state(b)).lastSeenAt?.getTime() === at(20_000).getTime(), { what: 'b seen' });
    expect((await state(b)).status).toBe('connected');

    // seen then offline in one batch: ends disconnected at the offline time.
    const c = await newDevice();
    await publishBatch([
      { device_id: c, kind: 'seen', at: at(30_000) },
      { device_id: c, kind: 'offline', at: at(31_000) },
    ]);
    await waitFor(async () => (await state(c)).lastSeenAt !== null, { what: 'c applied' });
    expect(await state(c)).toEqual({ status: 'disconnected', statusChangedAt: at(31_000), lastSeenAt: at(30_000) });

    // Each status change is one partner event, committed with it; traffic that changes nothing adds none.
    expect(await partnerEventsOf(a)).toEqual([
      { type: 'device.connected', status_changed_at: at(1000).toISOString(), org_node_ids: [1] },
      { type: 'device.disconnected', status_changed_at: at(9000).toISOString(), org_node_ids: [1] },
    ]);
    expect((await partnerEventsOf(b)).map((e) => e.type)).toEqual(['device.connected']);
    expect((await partnerEventsOf(c)).map((e) => e.type)).toEqual(['device.connected', 'device.disconnected']);

    // Every batch was acked after its commit.
    const jsm = await nc.jetstreamManager();
    await waitFor(async () => {
      const info = await jsm.consumers.info(names.events, `registry-connectivity-${id}`);
      return info.num_ack_pending === 0 && info.num_pending === 0;
    }, { what: 'all batches acked' });
  });

  it('a batch of a removed device stored after its id was provisioned again changes nothing: the new record starts disconnected', async () => {
    // The removed device was connected until its removal; its batches reach the store only now
    // (the consumer lagged), after the id was provisioned again at `reprovisioned`.
    const reprovisioned = at(60_000);
    const dev = await newDevice('meter', reprovisioned);
    const other = await newDevice('meter');
    await publishBatch([
      { device_id: dev, kind: 'seen', at: at(50_000), product: 'meter' },
      { device_id: dev, kind: 'offline', at: at(59_000), product: 'meter' },
    ]);
    await publishBatch([
      { device_id: dev, kind: 'seen', at: at(59_500), product: 'meter' },
      // A device of the same batch is applied as ever: the batch was stored.
      { device_id: other, kind: 'seen', at: at(59_500), product: 'meter' },
    ]);
    await waitFor(async () => (await state(other)).status === 'connected', { what: 'the other device connected' });
    // Two replicas share the consumer: wait until every batch is stored and acked.
    const jsm = await nc.jetstreamManager();
    await waitFor(async () => {
      const info = await jsm.consumers.info(names.events, `registry-connectivity-${id}`);
      return info.num_ack_pending === 0 && info.num_pending === 0;
    }, { what: 'all batches acked' });
    expect(await state(dev)).toEqual({ status: 'disconnected', statusChangedAt: null, lastSeenAt: null });
    expect(await partnerEventsOf(dev)).toEqual([]);
    // The new device's own first message connects it, dated by itself alone.
    await publishBatch([{ device_id: dev, kind: 'seen', at: at(61_000), product: 'meter' }]);
    await waitFor(async () => (await state(dev)).status === 'connected', { what: 'the new device connected' });
    expect(await state(dev)).toEqual({ status: 'connected', statusChangedAt: at(61_000), lastSeenAt: at(61_000) });
    expect(await partnerEventsOf(dev)).toEqual([{ type: 'device.connected', status_changed_at: at(61_000).toISOString(), org_node_ids: [1] }]);
  });

  it('a malformed batch is dropped without blocking the ones after it', async () => {
    const d = await newDevice();
    await js.publish(names.eventsSubject, new TextEncoder().encode('not json'));
    await js.publish(names.eventsSubject, JSONCodec().encode({ events: [{ device_id: 'bad', kind: 'seen', at: 'never' }] }));
    await publishBatch([{ device_id: d, kind: 'seen', at: at(40_000) }]);
    await waitFor(async () => (await state(d)).status === 'connected', { what: 'd connected' });
  });
});

describe('silence sweep', () => {
  it('disconnects connected devices silent for the window, at the moment the silence began', async () => {
    const now = new Date();
    const quiet = await newDevice();
    const chatty = await newDevice();
    await testDb.db.device.update({ where: { deviceId: quiet }, data: { status: 'connected', statusChangedAt: new Date(now.getTime() - 60_000), lastSeenAt: new Date(now.getTime() - 10_000) } });
    await testDb.db.device.update({ where: { deviceId: chatty }, data: { status: 'connected', statusChangedAt: new Date(now.getTime() - 60_000), lastSeenAt: new Date(now.getTime() - 1_000) } });
    const swept = await disconnectSilent(testDb.db, 5, now);
    expect(swept).toContain(quiet);
    expect(swept).not.toContain(chatty);
    expect(await state(quiet)).toEqual({ status: 'disconnected', statusChangedAt: new Date(now.getTime() - 5_000), lastSeenAt: new Date(now.getTime() - 10_000) });
    expect((await state(chatty)).status).toBe('connected');
    // Running it again (another replica) changes nothing.
    expect(await disconnectSilent(testDb.db, 5, now)).not.toContain(quiet);
    // One device.disconnected for the partners, at the moment the silence began.
    expect(await partnerEventsOf(quiet)).toEqual([{ type: 'device.disconnected', status_changed_at: new Date(now.getTime() - 5_000).toISOString(), org_node_ids: [1] }]);
    expect(await partnerEventsOf(chatty)).toEqual([]);
  });
});

describe('telemetry from DEVICE_IN', () => {
  beforeAll(() => {
    const w = telemetryConsumer(nc, testDb.db, { stream: names.deviceIn, durable: `registry-telemetry-${id}`, filterSubject: 'dev.in.*.*.tele.>' }, logger);
    workers.push(w);
    w.start();
  });

  async function capture(subject: string, topic: string, receivedAt: Date, payload: string): Promise<void> {
    const h = headers();
    h.set('Mqtt-Topic', topic);
    h.set('Received-At', receivedAt.toISOString());
    h.set('Mqtt-Retain', '0');
    h.set('Mqtt-Qos', '0');
    await js.publish(subject, new TextEncoder().encode(payload), { headers: h });
  }

  it('stores tele messages of known devices once, with topic and receive time; ignores other topics', async () => {
    const dev = await newDevice();
    const t1 = new Date(Date.now() - 5000);
    await capture(`dev.in.light.${dev}.tele.heartbeat`, `light/${dev}/tele/heartbeat`, t1, '{"uptime_s":300,"rssi_dbm":-60,"heap_free":1000}');
    await capture(`dev.in.light.${dev}.tele.heartbeat`, `light/${dev}/tele/heartbeat`, t1, '{"uptime_s":300,"rssi_dbm":-60,"heap_free":1000}');
    await capture(`dev.in.light.${dev}.status`, `light/${dev}/status`, t1, 'online');
    await capture(`dev.in.light.${randomDeviceId()}.tele.heartbeat`, 'light/x/tele/heartbeat', t1, '{}');
    await capture(`dev.in.light.${dev}.tele.env_1`, `light/${dev}/tele/env.1`, new Date(t1.getTime() + 1), '{"t":1}');
    await waitFor(async () => (await testDb.db.telemetry.count({ where: { deviceId: dev } })) === 2, { what: 'telemetry rows' });
    const jsm = await nc.jetstreamManager();
    await waitFor(async () => (await jsm.consumers.info(names.deviceIn, `registry-telemetry-${id}`)).num_pending === 0, { what: 'consumed' });
    const rows = await testDb.db.telemetry.findMany({ where: { deviceId: dev }, orderBy: { createdAt: 'asc' } });
    expect(rows.map((r) => ({ topic: r.topic, payload: r.payload, createdAt: r.createdAt }))).toEqual([
      { topic: `light/${dev}/tele/heartbeat`, payload: '{"uptime_s":300,"rssi_dbm":-60,"heap_free":1000}', createdAt: t1 },
      { topic: `light/${dev}/tele/env.1`, payload: '{"t":1}', createdAt: new Date(t1.getTime() + 1) },
    ]);
  });

  it('does not store telemetry received before the device record was created (a removed device that had the id)', async () => {
    const created = new Date(Date.now() - 60_000);
    const dev = await newDevice('light', created);
    await capture(`dev.in.light.${dev}.tele.heartbeat`, `light/${dev}/tele/heartbeat`, new Date(created.getTime() - 1), '{"removed":1}');
    await capture(`dev.in.light.${dev}.tele.heartbeat`, `light/${dev}/tele/heartbeat`, created, '{"own":1}');
    await waitFor(async () => (await testDb.db.telemetry.count({ where: { deviceId: dev } })) === 1, { what: 'own telemetry' });
    const jsm = await nc.jetstreamManager();
    await waitFor(async () => (await jsm.consumers.info(names.deviceIn, `registry-telemetry-${id}`)).num_pending === 0, { what: 'consumed' });
    expect((await testDb.db.telemetry.findMany({ where: { deviceId: dev } })).map((r) => r.payload)).toEqual(['{"own":1}']);
  });

  it('retention deletes rows older than the cutoff', async () => {
    const dev = await newDevice();
    const old = new Date(Date.now() - 31 * 86_400_000);
    await capture(`dev.in.light.${dev}.tele.heartbeat`, `light/${dev}/tele/heartbeat`, old, '{"old":1}');
    await capture(`dev.in.light.${dev}.tele.heartbeat`, `light/${dev}/tele/heartbeat`, new Date(), '{"new":1}');
    await waitFor(async () => (await testDb.db.telemetry.count({ where: { deviceId: dev } })) === 2, { what: 'rows' });
    expect(await purgeTelemetry(testDb.db, new Date(Date.now() - 30 * 86_400_000))).toBeGreaterThanOrEqual(1);
    expect((await testDb.db.telemetry.findMany({ where: { deviceId: dev } })).map((r) => r.payload)).toEqual(['{"new":1}']);
  });
});
