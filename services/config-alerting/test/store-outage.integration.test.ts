/**
 * A database stopped while config-alerting runs: every subject it serves needs the database and
 * answers 503 service_unavailable (never 500), quickly; the readings consumer keeps what it could
 * not store in DEVICE_IN, and once the database is back everything works again and those readings
 * are stored.
 */
import { headers as natsHeaders, RetentionPolicy, StorageType } from 'nats';
import type { RequestEnvelope } from '@fleet/contracts';
import { RegistryClient } from '@fleet/registry-client';
import type { Bus, DurablePullConsumer } from '@fleet/service-kit';
import { answersNotUnavailable, cuttableDatabase, randomDeviceId, RegistryStandIn, uniqueId, waitFor, type CuttableDatabase } from '@fleet/test-kit';
import { readingsConsumer } from '../src/handlers/readings-consumer';
import { serveConfig, type ConfigSubject } from '../src/handlers/serve';
import { openConfigDb, type ConfigDb } from '../src/store/prisma';
import { connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb } from './support';

let nats: PrivateNats;
let testDb: TestDb;
let proxy: CuttableDatabase;
let db: ConfigDb;
let bus: Bus;
let registry: RegistryStandIn;
let readings: DurablePullConsumer;
const manager = principal({ permissions: ['config_read', 'config_write', 'profile_manage', 'signal_manage'] });
const deviceId = randomDeviceId();
const device = { device_id: deviceId, product: 'light' as const, org_node_id: 1, name: null };

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  proxy = await cuttableDatabase(testDb.url);
  db = openConfigDb(proxy.url, 2);
  bus = await connectBus(nats.url);
  registry = new RegistryStandIn(bus.connection);
  registry.described.set(deviceId, { device_id: deviceId, product: 'light', name: null, org_node: { id: 1, parent_id: null, name: 'Root' }, automation_enabled: true });
  serveConfig(bus, { db, registry: new RegistryClient(bus, { timeoutMs: 1000, logger }) });
  const jsm = await bus.connection.jetstreamManager();
  await jsm.streams.add({ name: 'DEVICE_IN', subjects: ['dev.in.>'], retention: RetentionPolicy.Limits, storage: StorageType.Memory });
  readings = readingsConsumer(bus.connection, db, { stream: 'DEVICE_IN', durable: uniqueId('readings'), filterSubject: 'dev.in.light.*.tdl.>', batch: 100 }, logger);
  readings.start();
});

afterAll(async () => {
  await readings?.stop();
  registry?.close();
  await bus?.drain();
  await db?.$disconnect();
  await proxy?.close();
  await testDb?.drop();
  await nats?.stop();
});

const solid = { light: { type: 'Solid', color: { r: 0, g: 128, b: 0 } } };
const envelope = (parts: Partial<RequestEnvelope>): RequestEnvelope => ({ request_id: uniqueId('req'), principal: manager, params: {}, query: {}, ...parts });
const onDevice = (parts: Partial<RequestEnvelope> = {}) => envelope({ device, ...parts, params: { device_id: deviceId, ...parts.params } });

async function relay(at: number): Promise<void> {
  const h = natsHeaders();
  h.set('Mqtt-Topic', `lt/${deviceId}/tdl/probe-1`);
  await bus.connection.jetstream().publish(`dev.in.light.${deviceId}.tdl.probe-1`, new TextEncoder().encode(JSON.stringify({ at, temp_c: 4.5, humidity: null, breach: false })), { headers: h });
}

it('answers 503 on every subject while its database is stopped, keeps readings in the stream, and recovers', async () => {
  expect(await bus.request('config.device.get', onDevice())).toMatchObject({ ok: true, status: 200 });

  proxy.cut();
  const requests: Record<ConfigSubject, RequestEnvelope> = {
    'config.device.get': onDevice(),
    'config.sensor.attach': onDevice({ body: { tdl_id: 'probe-1' } }),
    'config.sensor.update': onDevice({ params: { device_id: deviceId, tdl_id: 'probe-1' }, body: { profile_id: null, label: 'Door' } }),
    'config.sensor.detach': onDevice({ params: { device_id: deviceId, tdl_id: 'probe-1' } }),
    'config.device.signal': onDevice({ body: { alert_signal_id: null } }),
    'config.profile.list': envelope({}),
    'config.profile.create': envelope({ body: { name: 'Cold', rules: [] } }),
    'config.profile.update': envelope({ params: { profile_id: '1' }, body: { name: 'Colder' } }),
    'config.profile.delete': envelope({ params: { profile_id: '1' } }),
    'config.signal.list': envelope({}),
    'config.signal.create': envelope({ body: { name: 'Mine', entries: { CLEAR: solid, ADVISORY: solid, WARNING: solid, NO_DATA: solid } } }),
    'config.signal.update': envelope({ params: { signal_id: '1' }, body: { name: 'Yours' } }),
    'config.signal.delete': envelope({ params: { signal_id: '1' } }),
  };
  const subjects = Object.keys(requests) as ConfigSubject[];
  expect(await answersNotUnavailable(bus, subjects.map((subject) => ({ subject, envelope: requests[subject] })))).toEqual([]);
  const at = Math.floor(Date.now() / 1000);
  await relay(at);

  proxy.restore();
  await waitFor(async () => (await bus.request('config.device.get', onDevice())).ok, { timeoutMs: 10_000, what: 'config-alerting answering again' });
  await waitFor(async () => (await testDb.db.reading.count({ where: { deviceId, tdlId: 'probe-1' } })) === 1, { timeoutMs: 40_000, what: 'the reading relayed during the outage stored' });
}, 90_000);
