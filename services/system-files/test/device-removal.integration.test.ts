/**
 * A removed device is forgotten: device-registry's evt.registry.device.changed.v1 (change
 * removed), read from a REGISTRY_EVENTS-like stream of this file's own by the same durable
 * consumer the service runs, clears the device's cached settings, response feed and transfers on
 * real Postgres, so an id provisioned again starts clean; the removed device's late traffic is
 * never stored, and the status feed shows only what came after the removal.
 */
import type { JetStreamClient } from 'nats';
import { ensureStream, eventStreamPlan, publishDurable, type Bus, type DurablePullConsumer, type HandlerContext, type RequestOf } from '@fleet/service-kit';
import { randomDeviceId, RegistryStandIn, uniqueId, waitFor } from '@fleet/test-kit';
import type { SystemDeps } from '../src/handlers/deps';
import { forgetRemovedDevices } from '../src/handlers/device-events';
import { listResponses } from '../src/handlers/responses';
import { readDeviceSettings } from '../src/handlers/settings';
import { deviceStatus } from '../src/handlers/status';
import { listTransfers } from '../src/handlers/transfers';
import { insertTransfer } from '../src/store/transfers';
import { captured, createTestDb, envelope, logger, startTestbed, type TestDb, type Testbed } from './support';

let testDb: TestDb;
let bed: Testbed;
let bus: Bus;
let js: JetStreamClient;
let stream: Testbed['stream'];
let deps: SystemDeps;
let registry: RegistryStandIn;
let removals: DurablePullConsumer;
let eventsStream: string;
const durable = uniqueId('removals');

const ctx = (): HandlerContext => {
  const deadline = Date.now() + 10_000;
  return { logger, deadline, remainingMs: () => Math.max(0, deadline - Date.now()), beforeCommit: async () => undefined } as unknown as HandlerContext;
};

beforeAll(async () => {
  testDb = await createTestDb();
  bed = await startTestbed({ db: testDb.db });
  ({ bus, js, stream, registry, deps } = bed);
  bed.startIntake(testDb.db);
  // device-registry's event stream, under this file's subject prefix and a name of its own.
  eventsStream = `REGISTRY_EVENTS_${stream.prefix.slice(0, -1)}`;
  const jsm = await bus.connection.jetstreamManager();
  await ensureStream(jsm, { ...eventStreamPlan('REGISTRY_EVENTS', stream.prefix), name: eventsStream }, logger);
  removals = forgetRemovedDevices(bus.connection, testDb.db, logger, { durable, prefix: stream.prefix, stream: eventsStream });
  removals.start();
});

afterAll(async () => {
  await removals?.stop();
  const jsm = await bus?.connection.jetstreamManager();
  await jsm?.streams.delete(eventsStream).catch(() => undefined);
  await bed?.close();
  await testDb?.drop();
});

const deviceEvent = (deviceId: string, change: 'provisioned' | 'updated' | 'moved' | 'removed', at = new Date()) =>
  publishDurable(bus.connection, 'evt.registry.device.changed.v1', { device_id: deviceId, change, at: at.toISOString() }, { prefix: stream.prefix });

/** Resolves once both consumers (device events, device traffic) have settled everything they were given. */
async function settled(): Promise<void> {
  const jsm = await bus.connection.jetstreamManager();
  await waitFor(
    async () => {
      const events = await jsm.consumers.info(eventsStream, durable);
      const traffic = await jsm.consumers.info(stream.name, 'sys');
      return events.num_pending + events.num_ack_pending + traffic.num_pending + traffic.num_ack_pending === 0;
    },
    { what: 'consumers settled' },
  );
}

const settings = (id: string) => readDeviceSettings(deps, envelope(id) as never);
/** Whether settings are cached for the device (an empty cache answers 200 with `received_at` null). */
const hasSettings = async (id: string) => ((await settings(id)).body as { received_at: string | null }).received_at !== null;
/** The answer for a device with nothing cached. */
const noSettings = (id: string) => ({ device_id: id, settings: {}, fw_ver: null, file_list: [], received_at: null });
const feed = async (id: string) =>
  ((await listResponses(deps, envelope(id, { query: { since: new Date(Date.now() - 86_400_000).toISOString() } }) as never)).body as { rows: Array<{ line: string }> }).rows.map((r) => r.line);
const transfers = async (id: string) => ((await listTransfers(deps, envelope(id, { query: {} }) as never)).body as { transfers: Array<{ transfer_id: string }> }).transfers.map((t) => t.transfer_id);
const status = async (id: string) => (await deviceStatus(deps, envelope(id) as RequestOf<'system.status.get'>, ctx())).body as Record<string, unknown>;

/** What a device leaves behind in system-files: reported settings, feed rows, a transfer, status history. */
async function leaveTraces(id: string, tag: string, receivedAt = new Date()): Promise<string> {
  await captured(js, stream.prefix, { deviceId: id, levels: 'status', payload: `online-${tag}`, receivedAt });
  await captured(js, stream.prefix, { deviceId: id, levels: 'tele/heartbeat', payload: { uptime_s: 1, rssi_dbm: -50, heap_free: 1 }, receivedAt });
  await captured(js, stream.prefix, { deviceId: id, levels: 'sys/settings', payload: { fw_ver: tag, file_list: [], enc: true }, receivedAt });
  await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: `query>ok`, receivedAt });
  await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: `log>${tag}`, receivedAt });
  const transferId = uniqueId('t');
  await insertTransfer(testDb.db, { id: transferId, deviceId: id, partnerId: 'p1', idempotencyKey: null, fingerprint: transferId, src: 'files/a.mp3', dest: 'a.mp3', sha256: 'ab'.repeat(32), corrMode: 'envelope', line: `addfile>${tag}` });
  return transferId;
}

describe('device removal', () => {
  it('forgets a removed device’s cached settings, feed rows, transfers and status history: an id provisioned again starts clean', async () => {
    const id = randomDeviceId();
    registry.connectivity.set(id, { status: 'disconnected', status_changed_at: null, last_seen_at: null });
    const before = new Date(Date.now() - 5000);
    await leaveTraces(id, 'old', before);
    await waitFor(async () => (await feed(id)).includes('log>old') && (await hasSettings(id)));
    expect(await transfers(id)).toHaveLength(1);
    expect(await status(id)).toMatchObject({ last_connection: { payload: 'online-old' }, heartbeats: [expect.anything()] });

    await deviceEvent(id, 'removed');
    await waitFor(async () => !(await hasSettings(id)), { what: 'settings forgotten' });
    expect((await settings(id)).body).toEqual(noSettings(id));
    expect(await feed(id)).toEqual([]);
    expect(await transfers(id)).toEqual([]);
    expect(await status(id)).toMatchObject({ last_connection: null, snapshots: [], heartbeats: [] });

    // The device provisioned again reports: that is kept, and only that shows.
    await leaveTraces(id, 'new');
    await waitFor(async () => (await feed(id)).includes('log>new'));
    expect(await feed(id)).toEqual(['query>ok', 'log>new']);
    expect((await settings(id)).body).toMatchObject({ fw_ver: 'new' });
    expect(await status(id)).toMatchObject({ last_connection: { payload: 'online-new' }, heartbeats: [expect.anything()] });
  });

  it('never stores the removed device’s traffic that arrives late (received before the removal)', async () => {
    const id = randomDeviceId();
    const removedAt = new Date();
    await deviceEvent(id, 'removed', removedAt);
    await settled();
    const late = new Date(removedAt.getTime() - 1000);
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/settings', payload: { fw_ver: 'late', file_list: [], enc: true }, receivedAt: late });
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: 'log>late', receivedAt: late });
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: 'log>after', receivedAt: new Date(removedAt.getTime() + 1000) });
    await settled();
    expect(await feed(id)).toEqual(['log>after']);
    expect((await settings(id)).body).toEqual(noSettings(id));
  });

  it('a removal event read late forgets only what predates it; other changes and other devices are left alone', async () => {
    const id = randomDeviceId();
    const other = randomDeviceId();
    const removedAt = new Date(Date.now() - 60_000);
    await leaveTraces(id, 'after-removal');
    await leaveTraces(other, 'other', removedAt);
    await waitFor(async () => (await feed(id)).length === 2 && (await feed(other)).length === 2);
    for (const change of ['provisioned', 'updated', 'moved'] as const) await deviceEvent(other, change);
    await deviceEvent(id, 'removed', removedAt);
    await settled();
    expect((await settings(id)).body).toMatchObject({ fw_ver: 'after-removal' });
    expect(await feed(id)).toEqual(['query>ok', 'log>after-removal']);
    expect(await transfers(id)).toHaveLength(1);
    expect((await settings(other)).body).toMatchObject({ fw_ver: 'other' });
    expect(await transfers(other)).toHaveLength(1);
  });
});
