/**
 * The status feed on real NATS, JetStream and Postgres: connectivity from a registry stand-in
 * (through the registry client, under a subject prefix of this file's own), the rest from a
 * DEVICE_IN stream of the file's own with a retention window, filled as the bridge captures
 * traffic; device removals from the service's database.
 */
import { nanos, type JetStreamClient } from 'nats';
import { ApiError, type Bus, type HandlerContext, type RequestOf } from '@fleet/service-kit';
import { randomDeviceId, RegistryStandIn, rejectionOf } from '@fleet/test-kit';
import type { SystemDeps } from '../src/handlers/deps';
import { deviceStatus } from '../src/handlers/status';
import { DeviceInHistory } from '../src/history/device-in-history';
import { forgetRemovedDevice } from '../src/store/removals';
import { captured, createTestDb, envelope, logger, startTestbed, type TestDb, type Testbed } from './support';

let testDb: TestDb;
let bed: Testbed;
let bus: Bus;
let js: JetStreamClient;
let stream: Testbed['stream'];
let deps: SystemDeps;
let registry: RegistryStandIn;

const context = (ms = 10_000): HandlerContext => {
  const deadline = Date.now() + ms;
  return { logger, deadline, remainingMs: () => Math.max(0, deadline - Date.now()), beforeCommit: async () => undefined };
};

async function status(deviceId: string, query: { limit?: number } = {}, product: 'light' | 'meter' = 'light'): Promise<Record<string, unknown>> {
  const answer = await deviceStatus(deps, envelope(deviceId, { query }, product) as RequestOf<'system.status.get'>, context());
  expect(answer.status).toBe(200);
  return answer.body as Record<string, unknown>;
}

const connectivity = { status: 'connected' as const, status_changed_at: '2026-11-25T10:00:00.000Z', last_seen_at: '2026-11-25T10:05:00.000Z' };

beforeAll(async () => {
  testDb = await createTestDb();
  bed = await startTestbed({ db: testDb.db });
  ({ bus, js, stream, registry, deps } = bed);
  // History reaches back three days, as DEVICE_IN keeps it.
  const jsm = await bus.connection.jetstreamManager();
  const info = await jsm.streams.info(stream.name);
  await jsm.streams.update(stream.name, { ...info.config, max_age: nanos(72 * 3_600_000) });
});

afterAll(async () => {
  await bed?.close();
  await testDb?.drop();
});

describe('status feed', () => {
  it('connectivity, the last connection string, snapshots and heartbeats newest first, the history window', async () => {
    const id = randomDeviceId();
    registry.connectivity.set(id, connectivity);
    const put = (levels: string, payload: string | object, direction: 'in' | 'out' = 'in') => captured(js, stream.prefix, { deviceId: id, levels, payload, direction });
    await put('status', 'offline');
    await put('tele/heartbeat', { uptime_s: 300, rssi_dbm: -61, heap_free: 81234 });
    await put('status', 'online');
    await put('tele/power', { w: 12.5 });
    await put('tele/heartbeat', { uptime_s: 600, rssi_dbm: -63, heap_free: 80000 });
    await put('tele/env', 'not json');
    await put('tele/heartbeat', { uptime_s: 900, rssi_dbm: 'weak' });
    // Sent to the device, or on other topics: not part of the feed.
    await put('status', 'offline', 'out');
    await put('tele/heartbeat', { uptime_s: 1 }, 'out');
    await put('sys/resp', 'query>ok');
    await put('tele/deep/er', { x: 1 });

    const body = await status(id);
    expect(body).toEqual({
      device_id: id,
      status: 'connected',
      status_changed_at: connectivity.status_changed_at,
      last_seen_at: connectivity.last_seen_at,
      last_connection: { payload: 'online', received_at: expect.any(String) },
      snapshots: [
        { kind: 'env', data: 'not json', received_at: expect.any(String) },
        { kind: 'power', data: { w: 12.5 }, received_at: expect.any(String) },
      ],
      heartbeats: [
        { uptime_s: 900, rssi_dbm: null, heap_free: null, received_at: expect.any(String) },
        { uptime_s: 600, rssi_dbm: -63, heap_free: 80000, received_at: expect.any(String) },
        { uptime_s: 300, rssi_dbm: -61, heap_free: 81234, received_at: expect.any(String) },
      ],
      history_hours: 72,
    });
    const heartbeats = body.heartbeats as Array<{ received_at: string }>;
    expect(Date.parse(heartbeats[0]!.received_at)).toBeGreaterThanOrEqual(Date.parse(heartbeats[1]!.received_at));
  });

  it('limit caps snapshots and heartbeats each', async () => {
    const id = randomDeviceId();
    registry.connectivity.set(id, connectivity);
    for (let i = 0; i < 4; i += 1) {
      await captured(js, stream.prefix, { deviceId: id, levels: 'tele/heartbeat', payload: { uptime_s: i } });
      await captured(js, stream.prefix, { deviceId: id, levels: `tele/k${i}`, payload: { i } });
    }
    const body = await status(id, { limit: 2 });
    expect((body.heartbeats as Array<{ uptime_s: number }>).map((h) => h.uptime_s)).toEqual([3, 2]);
    expect((body.snapshots as Array<{ kind: string }>).map((s) => s.kind)).toEqual(['k3', 'k2']);
  });

  it('reads snapshots and heartbeats under a topic root of more than one level', async () => {
    const id = randomDeviceId();
    registry.connectivity.set(id, connectivity);
    await captured(js, stream.prefix, { deviceId: id, root: 'acme/eu/light', levels: 'tele/heartbeat', payload: { uptime_s: 7 } });
    await captured(js, stream.prefix, { deviceId: id, root: 'acme/eu/light', levels: 'tele/power', payload: { w: 3 } });
    const body = await status(id, {});
    expect((body.heartbeats as Array<{ uptime_s: number }>).map((h) => h.uptime_s)).toEqual([7]);
    expect((body.snapshots as Array<{ kind: string }>).map((s) => s.kind)).toEqual(['power']);
  });

  it('a device that never sent anything: null and empty lists', async () => {
    const id = randomDeviceId();
    registry.connectivity.set(id, { status: 'disconnected', status_changed_at: null, last_seen_at: null });
    // A meter's traffic is under its own product.
    await captured(js, stream.prefix, { deviceId: id, levels: 'status', payload: 'online', product: 'light' });
    const body = await status(id, {}, 'meter');
    expect(body).toMatchObject({ status: 'disconnected', status_changed_at: null, last_seen_at: null, last_connection: null, snapshots: [], heartbeats: [] });
  });

  it('of a device id removed before, shows only what came after the removal', async () => {
    const id = randomDeviceId();
    registry.connectivity.set(id, connectivity);
    const removedAt = new Date(Date.now() - 10_000);
    const at = (offsetMs: number) => new Date(removedAt.getTime() + offsetMs);
    await captured(js, stream.prefix, { deviceId: id, levels: 'status', payload: 'online', receivedAt: at(-5000) });
    await captured(js, stream.prefix, { deviceId: id, levels: 'tele/heartbeat', payload: { uptime_s: 1 }, receivedAt: at(-4000) });
    await captured(js, stream.prefix, { deviceId: id, levels: 'tele/power', payload: { w: 1 }, receivedAt: at(-3000) });
    await forgetRemovedDevice(testDb.db, id, removedAt);
    expect(await status(id)).toMatchObject({ last_connection: null, snapshots: [], heartbeats: [] });
    await captured(js, stream.prefix, { deviceId: id, levels: 'tele/heartbeat', payload: { uptime_s: 2 }, receivedAt: at(1000) });
    await captured(js, stream.prefix, { deviceId: id, levels: 'status', payload: 'online', receivedAt: at(2000) });
    const body = await status(id);
    expect(body).toMatchObject({ last_connection: { payload: 'online' }, snapshots: [], heartbeats: [{ uptime_s: 2 }] });
  });

  it('404 when the registry does not know the device', async () => {
    const err = await rejectionOf(status(randomDeviceId()), ApiError);
    expect([err.status, err.code]).toEqual([404, 'not_found']);
  });

  it('503 when DEVICE_IN cannot be read', async () => {
    const id = randomDeviceId();
    registry.connectivity.set(id, connectivity);
    const gone = { ...deps, history: new DeviceInHistory(bus.connection, { stream: `${stream.name}_MISSING`, prefix: stream.prefix }) };
    const err = await rejectionOf(deviceStatus(gone, envelope(id) as RequestOf<'system.status.get'>, context()), ApiError);
    expect([err.status, err.code]).toEqual([503, 'service_unavailable']);
  });
});
