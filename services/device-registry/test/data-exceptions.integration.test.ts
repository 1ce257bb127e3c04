/**
 * Behind the gateway's own checks: a value Postgres refuses (U+0000 in text) that still reaches
 * the registry is the request's fault, 400 validation_error, never a 500.
 */
import { randomBytes } from 'node:crypto';
import type { Principal, ReplyEnvelope } from '@fleet/contracts';
import type { Bus, RequestOf } from '@fleet/service-kit';
import { randomDeviceId, uniqueId } from '@fleet/test-kit';
import { BridgeClient } from '@fleet/bridge-client';
import { serveRegistry, type RegistrySubject } from '../src/handlers/registry';
import { BridgeStandIn, connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb } from './support';

let nats: PrivateNats;
let testDb: TestDb;
let bus: Bus;
let bridge: BridgeStandIn;
const admin = principal({ permissions: ['access_all_devices', 'device_provisioning', 'config_write'] });

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  bus = await connectBus(nats.url);
  bridge = new BridgeStandIn(bus.connection);
  serveRegistry(bus, { db: testDb.db, kek: randomBytes(32), broker: new BridgeClient(bus, { timeoutMs: 1000, logger }), logger });
});

afterAll(async () => {
  bridge?.close();
  await bus?.drain();
  await testDb?.drop();
  await nats?.stop();
});

const call = (subject: RegistrySubject, p: Principal, parts: { params: Record<string, string>; body?: Record<string, unknown> }): Promise<ReplyEnvelope> =>
  bus.request(subject, { request_id: uniqueId('req'), principal: p, params: parts.params, query: {}, ...(parts.body ? { body: parts.body } : {}) } as RequestOf<RegistrySubject>);

it('answers 400 validation_error when Postgres refuses a value of the request', async () => {
  const id = randomDeviceId();
  const provisioned = await call('registry.device.provision', admin, { params: { device_id: id }, body: { credential_format: 'derived-v1' } });
  expect(provisioned.ok).toBe(true);
  const renamed = await call('registry.device.rename', admin, { params: { device_id: id }, body: { name: 'a\u0000b' } });
  expect(renamed).toEqual({ ok: false, error: { status: 400, code: 'validation_error', message: expect.any(String) } });
  expect((await testDb.db.device.findUniqueOrThrow({ where: { deviceId: id } })).name).toBeNull();
});
