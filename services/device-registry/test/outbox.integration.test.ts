/**
 * The registry's transactional outbox on a real nats-server and Postgres: each change commits
 * its event into outbox_events; the relay publishes the events to REGISTRY_EVENTS in order, once
 * each, also after NATS was out of its reach; a change rolled back leaves no event; replicas
 * relay one at a time. The relay reaches NATS through a TCP proxy the test cuts (the test kit's
 * cuttable proxy), while the test itself watches the stream directly.
 */
import { randomBytes } from 'node:crypto';
import { connect, DeliverPolicy, type JetStreamManager, type NatsConnection } from 'nats';
import type { Principal, RequestEnvelope } from '@fleet/contracts';
import type { BrokerCredentials } from '@fleet/bridge-client';
import type { Bus, HandlerContext, HandlerResult } from '@fleet/service-kit';
import { cuttableDatabase, randomDeviceId, uniqueId, waitFor, type CuttableDatabase } from '@fleet/test-kit';
import { runAdminCommand } from '../src/admin/commands';
import { OutboxRelay, REGISTRY_EVENTS_STREAM } from '../src/handlers/outbox-relay';
import { registryHandlers } from '../src/handlers/registry';
import { connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb } from './support';

/** Broker credentials held in memory: the bridge is not under test here. */
const broker: BrokerCredentials = { setCredential: async () => undefined, removeCredential: async () => undefined };
const admin: Principal = principal({ permissions: ['access_all_devices', 'device_provisioning', 'device_removal', 'config_write'] });

let nats: PrivateNats;
let testDb: TestDb;
/** The test's own view of JetStream, never cut. */
let watcher: Bus;
let jsm: JetStreamManager;
/** NATS as the relay reaches it. */
let proxy: CuttableDatabase;
let relayConnection: NatsConnection;
const relayLogger = logger.child({ component: 'outbox-relay' });
const relays: OutboxRelay[] = [];
let handlers: ReturnType<typeof registryHandlers>;

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  watcher = await connectBus(nats.url, 'watcher');
  jsm = await watcher.connection.jetstreamManager();
  proxy = await cuttableDatabase(nats.url);
  relayConnection = await connect({ servers: proxy.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  // Polling rarely, it relays the registry's own changes only because they wake it.
  relays.push(new OutboxRelay(testDb.db, relayConnection, relayLogger, { natsTimeoutMs: 300, pollIntervalMs: 60_000 }));
  relays[0]?.start();
  handlers = registryHandlers({ db: testDb.db, broker, kek: randomBytes(32), logger, relay: { wake: async (withinMs) => void (await Promise.all(relays.map((r) => r.wake(withinMs)))) } });
  await waitFor(() => jsm.streams.info(REGISTRY_EVENTS_STREAM).then(() => true), { what: 'the relay to create REGISTRY_EVENTS' });
});

afterAll(async () => {
  for (const relay of relays) await relay.stop();
  await relayConnection?.close();
  await proxy?.close();
  await watcher?.drain();
  await testDb?.drop();
  await nats?.stop();
});

afterEach(() => jest.restoreAllMocks());

function ctx(overrides: Partial<HandlerContext> = {}): HandlerContext {
  const deadline = Date.now() + 5_000;
  return { logger, deadline, remainingMs: () => Math.max(0, deadline - Date.now()), beforeCommit: async () => undefined, ...overrides };
}

const envelope = (deviceId: string, parts: Partial<RequestEnvelope> = {}): RequestEnvelope => ({
  request_id: uniqueId('req'),
  principal: admin,
  params: { device_id: deviceId },
  query: {},
  ...parts,
});

async function provision(deviceId = randomDeviceId()): Promise<string> {
  await handlers['registry.device.provision'](envelope(deviceId, { body: { credential_format: 'derived-v1' } }), ctx());
  return deviceId;
}

const rename = (deviceId: string, name: string, context = ctx()): Promise<HandlerResult> =>
  handlers['registry.device.rename'](envelope(deviceId, { body: { name } }), context);

const lastSeq = async (stream = REGISTRY_EVENTS_STREAM): Promise<number> => (await jsm.streams.info(stream)).state.last_seq;

interface StoredEvent {
  subject: string;
  payload: unknown;
  msgId: string | undefined;
}

/** The events a stream (REGISTRY_EVENTS unless named) holds after stream sequence `after`, read with an ordered consumer. */
async function eventsAfter(after: number, stream = REGISTRY_EVENTS_STREAM): Promise<StoredEvent[]> {
  const count = (await lastSeq(stream)) - after;
  if (count === 0) return [];
  const consumer = await watcher.connection.jetstream().consumers.get(stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: after + 1 });
  const events: StoredEvent[] = [];
  for await (const m of await consumer.fetch({ max_messages: count, expires: 5_000 })) {
    events.push({ subject: m.subject, payload: m.json(), msgId: m.headers?.get('Nats-Msg-Id') });
    if (events.length === count) break;
  }
  return events;
}

const outboxCount = (): Promise<number> => testDb.db.outboxEvent.count();
const deviceEvent = (deviceId: string, change: string) => ({ subject: 'evt.registry.device.changed.v1', payload: { device_id: deviceId, change, at: expect.any(String) } });
/** A partner event of the device, written by the same change (PARTNER_EVENTS). */
const partnerEvent = (deviceId: string, type: string) => ({
  subject: `evt.partner.${type}.v1`,
  payload: expect.objectContaining({ event: expect.objectContaining({ type, device_id: deviceId, version: 1 }) }),
});
const PARTNER_EVENTS = 'PARTNER_EVENTS';

it('keeps events in the outbox while NATS is out of reach, then publishes them in commit order, each once', async () => {
  const warnings = jest.spyOn(relayLogger, 'warn');
  const retries = jest.spyOn(relayLogger, 'debug');
  const recoveries = jest.spyOn(relayLogger, 'info');
  const before = await lastSeq();
  await waitFor(() => jsm.streams.info(PARTNER_EVENTS).then(() => true), { what: 'the relay to create PARTNER_EVENTS' });
  const partnerBefore = await lastSeq(PARTNER_EVENTS);
  proxy.cut();

  const deviceId = await provision();
  await rename(deviceId, 'Porch');
  const org = (await runAdminCommand(testDb.db, ['org', 'create', '--name', 'Annex'])) as { id: number };
  await handlers['registry.device.move'](envelope(deviceId, { body: { org_node_id: org.id } }), ctx());
  await handlers['registry.device.automation'](envelope(deviceId, { body: { enabled: false } }), ctx());
  await handlers['registry.device.remove'](envelope(deviceId, { query: { confirm: deviceId } }), ctx());

  const waiting = await testDb.db.outboxEvent.findMany({ orderBy: { id: 'asc' } });
  expect(waiting.map((e) => ({ subject: e.subject, payload: e.payload }))).toEqual([
    deviceEvent(deviceId, 'provisioned'),
    partnerEvent(deviceId, 'device.provisioned'),
    deviceEvent(deviceId, 'updated'),
    { subject: 'evt.registry.org.changed.v1', payload: { org_node_id: org.id, change: 'created', at: expect.any(String) } },
    deviceEvent(deviceId, 'moved'),
    partnerEvent(deviceId, 'device.moved'),
    deviceEvent(deviceId, 'updated'),
    deviceEvent(deviceId, 'removed'),
    partnerEvent(deviceId, 'device.removed'),
  ]);
  // Several failed attempts, one warning, nothing published, nothing lost.
  await waitFor(() => retries.mock.calls.length >= 2, { timeoutMs: 10_000, what: 'the relay to retry' });
  expect(warnings).toHaveBeenCalledTimes(1);
  expect(await outboxCount()).toBe(waiting.length);
  expect(await lastSeq()).toBe(before);

  proxy.restore();
  await waitFor(async () => (await outboxCount()) === 0, { timeoutMs: 15_000, what: 'the outbox to empty' });
  // Each stream holds its own events, in commit order, once each.
  const stored = (e: (typeof waiting)[number]) => ({ subject: e.subject, payload: e.payload, msgId: e.msgId });
  expect(await eventsAfter(before)).toEqual(waiting.filter((e) => !e.subject.startsWith('evt.partner.')).map(stored));
  expect(await eventsAfter(partnerBefore, PARTNER_EVENTS)).toEqual(waiting.filter((e) => e.subject.startsWith('evt.partner.')).map(stored));
  expect(recoveries.mock.calls.filter(([, message]) => message === 'relaying outbox events again')).toHaveLength(1);
}, 40_000);

it('leaves no event of a change rolled back after its event was written, and publishes nothing for it', async () => {
  const kept = await provision();
  await waitFor(async () => (await outboxCount()) === 0, { what: 'the provisioning event to be relayed' });
  const before = await lastSeq();
  const callerGone = (): HandlerContext =>
    ctx({
      beforeCommit: async () => {
        throw new Error('the caller stopped waiting');
      },
    });

  const lost = randomDeviceId();
  await expect(handlers['registry.device.provision'](envelope(lost, { body: { credential_format: 'derived-v1' } }), callerGone())).rejects.toThrow();
  await expect(rename(kept, 'Never', callerGone())).rejects.toThrow('the caller stopped waiting');
  expect(await testDb.db.device.findUnique({ where: { deviceId: lost } })).toBeNull();
  expect((await testDb.db.device.findUniqueOrThrow({ where: { deviceId: kept } })).name).toBeNull();
  expect(await outboxCount()).toBe(0);

  // Events go out in outbox order: once this later one is in the stream, nothing came before it.
  await rename(kept, 'Hall');
  await waitFor(async () => (await lastSeq()) > before, { what: 'the rename event' });
  expect(await eventsAfter(before)).toEqual([{ ...deviceEvent(kept, 'updated'), msgId: expect.any(String) }]);
});

it('another replica relays what it did not commit itself at its next poll; replicas relay one at a time, every event once, in commit order', async () => {
  const second = await connect({ servers: nats.url });
  try {
    relays.push(new OutboxRelay(testDb.db, second, relayLogger, { pollIntervalMs: 200 }));
    relays[1]?.start();
    const before = await lastSeq();
    // Nothing wakes a relay for the staff CLI's commit: the polling replica finds it.
    const org = (await runAdminCommand(testDb.db, ['org', 'create', '--name', 'Wing'])) as { id: number };
    await waitFor(async () => (await lastSeq()) > before, { what: 'the org event to be polled' });

    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await provision());
    await waitFor(async () => (await outboxCount()) === 0 && (await lastSeq()) >= before + 1 + ids.length, { timeoutMs: 10_000, what: 'every event relayed' });
    expect(await eventsAfter(before)).toEqual([
      { subject: 'evt.registry.org.changed.v1', payload: { org_node_id: org.id, change: 'created', at: expect.any(String) }, msgId: expect.any(String) },
      ...ids.map((id) => ({ ...deviceEvent(id, 'provisioned'), msgId: expect.any(String) })),
    ]);
  } finally {
    await relays.pop()?.stop();
    await second.close();
  }
});

it('answers a change once its event is in the stream, so caches dropped on it are dropped before the partner hears back', async () => {
  const deviceId = await provision();
  const before = await lastSeq();
  await rename(deviceId, 'Hall');
  // No waiting here: the answer came after the event was stored.
  expect(await eventsAfter(before)).toEqual([expect.objectContaining(deviceEvent(deviceId, 'updated'))]);
  expect(await outboxCount()).toBe(0);
});
