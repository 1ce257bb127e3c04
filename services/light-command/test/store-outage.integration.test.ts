/**
 * A database stopped while light-command runs: the subjects that read or write it answer 503
 * service_unavailable (never 500), quickly; a raw command, which needs no database, still goes
 * out; once the database is back, everything works again.
 */
import type { RequestEnvelope } from '@fleet/contracts';
import { BridgeClient } from '@fleet/bridge-client';
import type { Bus } from '@fleet/service-kit';
import { answersNotUnavailable, BridgeStandIn, cuttableDatabase, randomDeviceId, uniqueId, waitFor, type CuttableDatabase } from '@fleet/test-kit';
import { serveLight, type LightSubject } from '../src/handlers/light';
import { openLightDb, type LightDb } from '../src/store/prisma';
import { connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb } from './support';

let nats: PrivateNats;
let testDb: TestDb;
let proxy: CuttableDatabase;
let db: LightDb;
let bus: Bus;
let bridge: BridgeStandIn;
const operator = principal({ permissions: ['predefined_commands', 'raw_commands', 'state_read'] });
const device = { device_id: randomDeviceId(), product: 'light' as const, org_node_id: null, name: null };

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  proxy = await cuttableDatabase(testDb.url);
  db = openLightDb(proxy.url, 2);
  bus = await connectBus(nats.url);
  bridge = new BridgeStandIn(bus.connection);
  serveLight(bus, { db, publisher: new BridgeClient(bus, { timeoutMs: 1000, logger }), topicRoot: 'lt', logger });
});

afterAll(async () => {
  bridge?.close();
  await bus?.drain();
  await db?.$disconnect();
  await proxy?.close();
  await testDb?.drop();
  await nats?.stop();
});

const envelope = (parts: Partial<RequestEnvelope>): RequestEnvelope => ({ request_id: uniqueId('req'), principal: operator, params: {}, query: {}, ...parts });
const raw = () => envelope({ device, body: { channel: 'light1', payload: 'solid:FF0000' } });

it('answers 503 where it needs its stopped database, keeps sending raw commands and automation writes, and recovers', async () => {
  expect(await bus.request('light.state.get', envelope({ device }))).toMatchObject({ ok: true, status: 200 });

  proxy.cut();
  const needDatabase: Record<Exclude<LightSubject, 'light.command.raw' | 'light.automation.write'>, RequestEnvelope> = {
    'light.command.catalog': envelope({}),
    'light.effect.apply': envelope({ device, params: { channel: 'light1' }, body: { command: 'pulse' } }),
    'light.state.get': envelope({ device }),
  };
  const requests = (Object.keys(needDatabase) as Array<keyof typeof needDatabase>).map((subject) => ({ subject, envelope: needDatabase[subject] }));
  expect(await answersNotUnavailable(bus, requests)).toEqual([]);
  expect(await bus.request('light.command.raw', raw())).toMatchObject({ ok: true, status: 202 });
  const automation = { request_id: uniqueId('auto'), params: {}, query: {}, body: { device_id: device.device_id, payload: 'solid:00FF00' } };
  expect(await bus.request('light.automation.write', automation)).toMatchObject({ ok: true, status: 200 });

  proxy.restore();
  await waitFor(async () => (await bus.request('light.state.get', envelope({ device }))).ok, { timeoutMs: 10_000, what: 'light-command answering again' });
}, 60_000);
