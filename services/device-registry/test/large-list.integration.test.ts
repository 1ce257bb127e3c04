/**
 * A device list larger than one bus message (NATS max_payload, 1 MB by default) reaches the
 * caller whole: the bus sends it in parts (packages/service-kit/src/reply-parts.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Bus, RequestOf } from '@fleet/service-kit';
import { uniqueId } from '@fleet/test-kit';
import { BridgeClient } from '@fleet/bridge-client';
import { serveRegistry, type RegistrySubject } from '../src/handlers/registry';
import { createOrgNode } from '../src/store/orgs';
import { BridgeStandIn, connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb } from './support';

let nats: PrivateNats;
let testDb: TestDb;
let server: Bus;
let client: Bus;
let bridge: BridgeStandIn;

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  server = await connectBus(nats.url);
  client = await connectBus(nats.url, 'gateway');
  bridge = new BridgeStandIn(server.connection);
  serveRegistry(server, { db: testDb.db, kek: randomBytes(32), broker: new BridgeClient(server, { timeoutMs: 1000, logger }), logger });
});

afterAll(async () => {
  bridge?.close();
  await client?.drain();
  await server?.drain();
  await testDb?.drop();
  await nats?.stop();
});

it('lists ten thousand devices, several bus messages long, in device-id order', async () => {
  const node = (await createOrgNode(testDb.db, `Fleet ${uniqueId()}`, null)).id;
  const ids = Array.from({ length: 10_000 }, (_, k) => `L${k.toString(16).toUpperCase().padStart(11, '0')}`);
  await testDb.db.$executeRawUnsafe(
    `INSERT INTO devices (device_id, product, name, org_node_id, credential_source, status)
     SELECT unnest($1::text[]), 'light', 'Lobby light, second floor', $2, 'generate', 'disconnected'`,
    ids,
    node,
  );
  const reply = await client.request(
    'registry.device.list' as RegistrySubject,
    { request_id: uniqueId('r'), principal: principal({ permissions: ['access_all_devices', 'health_read'] }), params: {}, query: {} } as RequestOf<RegistrySubject>,
    { timeoutMs: 20_000 },
  );
  if (!reply.ok) throw new Error(`listing failed: ${JSON.stringify(reply.error)}`);
  const devices = (reply.body as { devices: Array<{ device_id: string }> }).devices;
  expect(Buffer.byteLength(JSON.stringify(reply.body))).toBeGreaterThan(2 * (client.connection.info?.max_payload ?? 0));
  expect(devices.map((d) => d.device_id)).toEqual(ids);
}, 60_000);
