/**
 * The silence sweep judges devices only on current data, on a real nats-server and Postgres:
 * while the connectivity consumer (two replicas sharing the durable) has a backlog, as of the
 * oldest report not stored yet; while NATS is out of the registry's reach and until contact has
 * held for the settle time, not at all. The registry's
 * connection goes through a TCP proxy the test cuts; the test plays the bridge on its own.
 */
import { connect, JSONCodec, RetentionPolicy, StorageType, type JetStreamManager, type NatsConnection } from 'nats';
import type { DurablePullConsumer } from '@fleet/service-kit';
import { cuttableDatabase, randomDeviceId, uniqueId, waitFor, type CuttableDatabase } from '@fleet/test-kit';
import { connectivityConsumer } from '../src/handlers/connectivity-consumer';
import { SilenceSweep, type SweepOutcome } from '../src/handlers/silence-sweep';
import { insertDevice } from '../src/store/devices';
import { connectBus, createTestDb, logger, startPrivateNats, type PrivateNats, type TestDb } from './support';
import type { Bus } from '@fleet/service-kit';

const SILENCE_S = 1500;
const MINUTE = 60_000;

let nats: PrivateNats;
let testDb: TestDb;
/** The bridge's and the test's own view of NATS, never cut. */
let bridge: Bus;
let jsm: JetStreamManager;
/** NATS as the registry reaches it. */
let proxy: CuttableDatabase;
let registry: NatsConnection;
const consumers: DurablePullConsumer[] = [];
const id = uniqueId('s');
const names = { stream: `DEVICE_EVENTS_${id}`, subject: `evt.bridge.${id}.connectivity.batch`, durable: `registry-connectivity-${id}` };
const sweepLogger = logger.child({ component: 'silence-sweep' });

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  bridge = await connectBus(nats.url, 'bridge');
  jsm = await bridge.connection.jetstreamManager();
  await jsm.streams.add({ name: names.stream, subjects: [`evt.bridge.${id}.>`], storage: StorageType.File, retention: RetentionPolicy.Limits });
  proxy = await cuttableDatabase(nats.url);
  registry = await connect({ servers: proxy.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
});

afterAll(async () => {
  await stopConsumers();
  await registry?.close();
  await proxy?.close();
  await bridge?.drain();
  await testDb?.drop();
  await nats?.stop();
});

afterEach(() => jest.restoreAllMocks());

/** The registry's replicas: two consumers sharing the durable, as two processes do. */
function startConsumers(): void {
  for (let i = 0; i < 2; i++) {
    const c = connectivityConsumer(registry, testDb.db, { stream: names.stream, durable: names.durable, subject: names.subject }, logger);
    consumers.push(c);
    c.start();
  }
}

async function stopConsumers(): Promise<void> {
  for (const c of consumers.splice(0)) await c.stop();
}

const sweep = (settleMs = 0, silenceSeconds = SILENCE_S): SilenceSweep =>
  new SilenceSweep(registry, testDb.db, { stream: names.stream, durable: names.durable, silenceSeconds, intervalMs: 3_600_000, settleMs, infoTimeoutMs: 500 }, sweepLogger);

/** A device connected since two hours ago, last stored as seen `lastSeenAgoMs` ago. */
async function connectedDevice(lastSeenAgoMs: number): Promise<string> {
  const deviceId = randomDeviceId();
  await insertDevice(testDb.db, { deviceId, product: 'light', name: null, orgNodeId: 1, credentialSource: 'generate', settingsKeyCiphertext: null, brokerPasswordHash: null });
  const now = Date.now();
  await testDb.db.device.update({
    where: { deviceId },
    data: { createdAt: new Date(now - 3 * 60 * MINUTE), status: 'connected', statusChangedAt: new Date(now - 2 * 60 * MINUTE), lastSeenAt: new Date(now - lastSeenAgoMs) },
  });
  return deviceId;
}

const state = (deviceId: string) => testDb.db.device.findUniqueOrThrow({ where: { deviceId }, select: { status: true, statusChangedAt: true, lastSeenAt: true } });

/** The partner events of a device waiting in the outbox, by type. */
async function partnerEventTypes(deviceId: string): Promise<string[]> {
  const rows = await testDb.db.outboxEvent.findMany({ where: { subject: { startsWith: 'evt.partner.' } }, orderBy: { id: 'asc' } });
  return rows.map((r) => (r.payload as { event: { type: string; device_id: string } }).event).filter((e) => e.device_id === deviceId).map((e) => e.type);
}

/** What the bridge publishes: one batch of `seen` reports, each with the time it heard the device. */
const seenBatch = (reports: Array<{ deviceId: string; at: Date }>) =>
  bridge.connection.jetstream().publish(names.subject, JSONCodec().encode({ events: reports.map((r) => ({ device_id: r.deviceId, product: 'light', kind: 'seen', at: r.at.toISOString() })) }));

const consumerIdle = async (): Promise<boolean> => {
  const info = await jsm.consumers.info(names.stream, names.durable);
  return info.num_pending === 0 && info.num_ack_pending === 0;
};

/** Sweeps until one is not skipped (the data became current), returning it. */
const firstSweepRun = (s: SilenceSweep): Promise<{ disconnected: string[] }> =>
  waitFor(async () => {
    const outcome = await s.runOnce();
    return 'disconnected' in outcome ? outcome : undefined;
  }, { timeoutMs: 15_000, intervalMs: 200, what: 'a sweep on current data' });

it('after a registry outage, judges devices as of when it began: a device that kept reporting is never disconnected, one silent before it is', async () => {
  // A silence window of seconds, so that the outage can outlast it in the test's own time.
  const silenceS = 3;
  startConsumers();
  await waitFor(() => jsm.consumers.info(names.stream, names.durable).then(() => true), { what: 'the durable consumer' });
  // The registry stops reading.
  await stopConsumers();
  const kept = await connectedDevice(500);
  const silent = await connectedDevice(20_000);
  // Meanwhile the bridge hears `kept` every half second and stores the batches in the stream,
  // for longer than the silence window.
  const outageBegan = Date.now();
  let lastReport = new Date();
  while (Date.now() - outageBegan < (silenceS + 1) * 1000) {
    lastReport = new Date();
    await seenBatch([{ deviceId: kept, at: lastReport }]);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }

  // Restarted: the sweep comes before the consumer has stored the backlog. It judges as of the
  // oldest report not stored yet, when `kept` had been heard just before and `silent` had not
  // been heard for longer than the window.
  const s = sweep(0, silenceS);
  const first: SweepOutcome = await s.runOnce();
  if (!('disconnected' in first)) throw new Error(`the sweep was skipped: ${JSON.stringify(first)}`);
  expect(first.asOf).toBeGreaterThanOrEqual(outageBegan - 1000);
  expect(first.asOf).toBeLessThan(outageBegan + 1000);
  expect(first.disconnected).toContain(silent);
  expect(first.disconnected).not.toContain(kept);
  expect((await state(kept)).status).toBe('connected');
  const silentNow = await state(silent);
  expect(silentNow.status).toBe('disconnected');
  expect(silentNow.statusChangedAt?.getTime()).toBe((silentNow.lastSeenAt?.getTime() ?? 0) + silenceS * 1000);
  expect(await partnerEventTypes(silent)).toEqual(['device.disconnected']);

  // The replicas catch up; the sweeps after judge on what they stored.
  startConsumers();
  await waitFor(consumerIdle, { what: 'the backlog stored' });
  const run = await s.runOnce();
  expect(run).toMatchObject({ disconnected: expect.not.arrayContaining([kept]) });
  const keptNow = await state(kept);
  expect(keptNow).toEqual({ status: 'connected', statusChangedAt: keptNow.statusChangedAt, lastSeenAt: lastReport });
  expect(keptNow.statusChangedAt?.getTime()).toBeLessThan(Date.now() - 100 * MINUTE);
  expect(await partnerEventTypes(kept)).toEqual([]);
  await stopConsumers();
}, 30_000);

it('while NATS is out of reach, and until contact has held for the settle time, judges nobody; the reports a bridge held then keep its devices connected', async () => {
  startConsumers();
  await waitFor(consumerIdle, { what: 'the consumer to be idle' });
  const held = await connectedDevice(40 * MINUTE);
  const s = sweep(3_000);

  proxy.cut();
  // NATS out of the registry's reach (and of the bridge's, which keeps its batch).
  const heldReport = new Date(Date.now() - 10 * MINUTE);
  expect(await s.runOnce()).toEqual({ skipped: 'unreachable', detail: expect.any(Object) });
  expect((await state(held)).status).toBe('connected');

  proxy.restore();
  await waitFor(() => jsm.consumers.info(names.stream, names.durable).then(() => registry.flush()).then(() => true), { what: 'the registry to reach NATS again' });
  // Back, but the bridge has not sent what it held yet: nothing pending, still no judgment.
  expect(await s.runOnce()).toEqual({ skipped: 'settling', detail: expect.objectContaining({ settleMs: 3_000 }) });
  expect((await state(held)).status).toBe('connected');

  // The bridge sends the batch it held; the sweep, once settled and current, keeps the device.
  await seenBatch([{ deviceId: held, at: heldReport }]);
  await waitFor(async () => (await state(held)).lastSeenAt?.getTime() === heldReport.getTime(), { timeoutMs: 10_000, what: 'the held report stored' });
  const run = await firstSweepRun(s);
  expect(run.disconnected).not.toContain(held);
  expect(await state(held)).toEqual({ status: 'connected', statusChangedAt: expect.any(Date), lastSeenAt: heldReport });
  expect(await partnerEventTypes(held)).toEqual([]);
  await stopConsumers();
}, 40_000);
