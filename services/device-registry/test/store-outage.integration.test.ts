/**
 * A database stopped while the registry runs: every subject answers 503 service_unavailable
 * (never 500), quickly; once the database is back, the same requests work again.
 */
import { randomBytes } from 'node:crypto';
import type { RequestEnvelope } from '@fleet/contracts';
import { BridgeClient } from '@fleet/bridge-client';
import type { Bus } from '@fleet/service-kit';
import { answersNotUnavailable, cuttableDatabase, randomDeviceId, uniqueId, waitFor, type CuttableDatabase } from '@fleet/test-kit';
import { REGISTRY_SUBJECTS, serveRegistry, type RegistrySubject } from '../src/handlers/registry';
import { openRegistryDb, type RegistryDb } from '../src/store/prisma';
import { BridgeStandIn, connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb } from './support';

let nats: PrivateNats;
let testDb: TestDb;
let proxy: CuttableDatabase;
let db: RegistryDb;
let bus: Bus;
let bridge: BridgeStandIn;
const admin = principal({ permissions: ['access_all_devices', 'device_provisioning', 'device_removal', 'health_read', 'config_write'] });
const deviceId = randomDeviceId();

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  proxy = await cuttableDatabase(testDb.url);
  db = openRegistryDb(proxy.url, 2);
  bus = await connectBus(nats.url);
  bridge = new BridgeStandIn(bus.connection);
  serveRegistry(bus, { db, kek: randomBytes(32), broker: new BridgeClient(bus, { timeoutMs: 1000, logger }), logger });
});

afterAll(async () => {
  bridge?.close();
  await bus?.drain();
  await db?.$disconnect();
  await proxy?.close();
  await testDb?.drop();
  await nats?.stop();
});

const device = { device_id: deviceId, product: 'light' as const, org_node_id: null, name: null };
const envelope = (parts: Partial<RequestEnvelope>): RequestEnvelope => ({ request_id: uniqueId('req'), principal: admin, params: {}, query: {}, ...parts });

/** One request per subject, each able to reach the database. */
const requests = (): Array<{ subject: RegistrySubject; envelope: RequestEnvelope }> => {
  const bySubject: Record<RegistrySubject, RequestEnvelope> = {
    'registry.scope.resolve': envelope({ params: { device_id: deviceId } }),
    'registry.device.list': envelope({}),
    'registry.device.get': envelope({ params: { device_id: deviceId }, device }),
    'registry.device.provision': envelope({ params: { device_id: randomDeviceId() }, body: { credential_format: 'derived-v1' } }),
    'registry.device.remove': envelope({ params: { device_id: deviceId }, device, query: { confirm: deviceId } }),
    'registry.device.health': envelope({ params: { device_id: deviceId }, device }),
    'registry.device.rename': envelope({ params: { device_id: deviceId }, device, body: { name: 'Hall' } }),
    'registry.device.move': envelope({ params: { device_id: deviceId }, device, body: { org_node_id: null } }),
    'registry.device.automation': envelope({ params: { device_id: deviceId }, device, body: { enabled: true } }),
    'registry.org.tree': envelope({}),
    'registry.device.connectivity': envelope({ principal: undefined, body: { device_id: deviceId } }),
    'registry.device.lookup': envelope({ principal: undefined, body: { device_ids: [deviceId] } }),
    'registry.org.paths': envelope({ principal: undefined, body: { org_node_ids: [1] } }),
    'registry.settings.seal': envelope({ principal: undefined, body: { device_id: deviceId, key: 'wifiPass', value: 'x' } }),
  };
  return (Object.keys(bySubject) as RegistrySubject[]).map((subject) => ({ subject, envelope: bySubject[subject] }));
};

it('answers 503 on every subject while its database is stopped, and works again once it is back', async () => {
  const provisioned = await bus.request('registry.device.provision', envelope({ params: { device_id: deviceId }, body: { credential_format: 'derived-v1' } }));
  expect(provisioned).toMatchObject({ ok: true, status: 201 });

  proxy.cut();
  expect(requests().map((r) => r.subject).sort()).toEqual([...REGISTRY_SUBJECTS].sort());
  expect(await answersNotUnavailable(bus, requests())).toEqual([]);

  proxy.restore();
  await waitFor(async () => (await bus.request('registry.device.get', envelope({ params: { device_id: deviceId }, device }))).ok, { timeoutMs: 10_000, what: 'the registry answering again' });
}, 60_000);
