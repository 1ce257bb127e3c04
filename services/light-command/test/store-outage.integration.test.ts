/**
 * A database stopped while light-command runs: the subjects that read or write it answer 503
 * service_unavailable (never 500), quickly; a raw command, which needs no database, still goes
 * out; once the database is back, everything works again.
 */
import type { RequestEnvelope } from '@fleet/contracts';
import { BridgeClient } from '@fleet/bridge-client';
import type { Bus } from '@fleet/service-kit';
import { answersNotUnavailable, BridgeStandIn, cuttableDatabase, randomDeviceId, uniqueId, waitFor, type CuttableDatabase } from '@fleet/test-kit';
import { LIGHT_SUBJECTS, serveLight } from '../src/handlers/light';
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

it('answers 503 where it needs its stopped database, keeps sending raw commands, and recovers', async () => {
  expect(await bus.request('light.state.get', envelope({ device }))).toMatchObject({ ok: true, status: 200 });

  proxy.cut();
  const needDatabase: Record<Exclude<(typeof LIGHT_SUBJECTS)[number], 'light.command.raw'>, RequestEnvelope> = {
    'light.command.catalog': envelope({}),
    'light.effect.apply': envelope({ device, params: { channel: 'light1' }, body: { command: 'pulse' } }),
    'light.state.get': envelope({ device }),
  };
  expect(await answersNotUnavailable(bus, Object.entries(needDatabase).map(([subject, env]) => ({ subject, envelope: env })))).toEqual([]);
  expect(await bus.request('light.command.raw', raw())).toMatchObject({ ok: true, status: 202 });

  proxy.restore();
  await waitFor(async () => (await bus.request('light.state.get', envelope({ device }))).ok, { timeoutMs: 10_000, what: 'light-command answering again' });
}, 60_000);
