/**
 * config-alerting on real NATS and Postgres: the routes' handlers over the bus, readings through
 * a DEVICE_IN stream, and evaluation cycles writing light1 through the automation writer
 * (light-command and device-registry are their stand-ins, which check bodies against the schemas).
 */
import { headers as natsHeaders, RetentionPolicy, StorageType } from 'nats';
import type { Principal, ReplyEnvelope } from '@fleet/contracts';
import { LightClient, type AutomationWriter } from '@fleet/light-client';
import { RegistryClient } from '@fleet/registry-client';
import type { Bus, DurablePullConsumer } from '@fleet/service-kit';
import { LightStandIn, randomDeviceId, RegistryStandIn, uniqueId, waitFor } from '@fleet/test-kit';
import { readingsConsumer } from '../src/handlers/readings-consumer';
import { pruneReadings, storeReadings } from '../src/store/readings';
import { serveConfig, type ConfigSubject } from '../src/handlers/serve';
import { EvaluationCycle } from '../src/use-cases/evaluation-cycle';
import { connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb } from './support';

let nats: PrivateNats;
let testDb: TestDb;
let bus: Bus;
let registry: RegistryStandIn;
let lights: LightStandIn;
let readings: DurablePullConsumer;
const manager = (): Principal => principal({ permissions: ['config_read', 'config_write', 'profile_manage', 'signal_manage'] });

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  bus = await connectBus(nats.url);
  registry = new RegistryStandIn(bus.connection);
  lights = new LightStandIn(bus.connection);
  serveConfig(bus, { db: testDb.db, registry: new RegistryClient(bus, { timeoutMs: 1000, logger }) });
  const jsm = await bus.connection.jetstreamManager();
  await jsm.streams.add({ name: 'DEVICE_IN', subjects: ['dev.in.>'], retention: RetentionPolicy.Limits, storage: StorageType.Memory });
  readings = readingsConsumer(bus.connection, testDb.db, { stream: 'DEVICE_IN', durable: uniqueId('readings'), filterSubject: 'dev.in.light.*.tdl.>', batch: 100 }, logger);
  readings.start();
});

afterAll(async () => {
  await readings?.stop();
  registry?.close();
  lights?.close();
  await bus?.drain();
  await testDb?.drop();
  await nats?.stop();
});

const light = (id = randomDeviceId()) => {
  registry.described.set(id, { device_id: id, product: 'light', name: 'Cold room', org_node: { id: 1, parent_id: null, name: 'Root' }, automation_enabled: true });
  return { device_id: id, product: 'light' as const, org_node_id: 1, name: 'Cold room' };
};

async function call(subject: ConfigSubject, p: Principal, parts: { device?: ReturnType<typeof light>; params?: Record<string, string>; body?: unknown } = {}): Promise<ReplyEnvelope> {
  return bus.request(subject, {
    request_id: uniqueId('req'),
    principal: p,
    params: parts.params ?? (parts.device ? { device_id: parts.device.device_id } : {}),
    query: {},
    ...(parts.device ? { device: parts.device } : {}),
    ...(parts.body !== undefined ? { body: parts.body as Record<string, unknown> } : {}),
  });
}

function ok(reply: ReplyEnvelope, status = 200): Record<string, unknown> {
  if (!reply.ok) throw new Error(`expected ${status}, got ${JSON.stringify(reply.error)}`);
  expect(reply.status).toBe(status);
  return (reply.body ?? {}) as Record<string, unknown>;
}

function refused(reply: ReplyEnvelope, status: number, code: string): { message: string; extra?: Record<string, unknown> } {
  if (reply.ok) throw new Error(`expected ${status} ${code}, got ${JSON.stringify(reply)}`);
  expect({ status: reply.error.status, code: reply.error.code }).toEqual({ status, code });
  return reply.error;
}

const solid = (r: number, g: number, b: number) => ({ light: { type: 'Solid', color: { r, g, b } } });
const entries = { CLEAR: solid(0, 128, 0), ADVISORY: solid(255, 255, 0), WARNING: { light: { type: 'Pulse', color: { r: 255, g: 0, b: 0 }, period_s: 0.5 } }, NO_DATA: solid(0, 0, 64) };
const hotRule = { all: [{ metric: 'latest_temp_c', op: '>', value: 8 }], level: 'WARNING' };

describe('profiles', () => {
  it('lists global plus own, edits own only with a version and a revision, and refuses duplicates, the cap and profiles in use', async () => {
    const me = manager();
    const other = manager();
    const listed = ok(await call('config.profile.list', me)).profiles as Array<Record<string, unknown>>;
    expect(listed).toEqual([expect.objectContaining({ name: 'Default', scope: 'global', is_default: true, version: 1 })]);
    const defaultId = String(listed[0]!.id);

    const created = await call('config.profile.create', me, { body: { name: 'Cold chain', rules: [hotRule] } });
    const { id } = ok(created, 201) as { id: number };
    expect(created.ok && created.headers).toEqual({ Location: `/v1/profiles/${id}` });
    refused(await call('config.profile.create', me, { body: { name: 'Cold chain', rules: [] } }), 409, 'name_taken');
    refused(await call('config.profile.create', me, { body: { name: 'Default', rules: [] } }), 409, 'name_taken');
    expect(refused(await call('config.profile.create', me, { body: { name: 'Bad', rules: [{ all: [{ metric: 'max_temp_c', op: '~', value: 1 }], level: 'WARNING' }] } }), 400, 'validation_error').message).toContain('rules[0].all[0].op');

    expect(ok(await call('config.profile.update', me, { params: { profile_id: String(id) }, body: { default: 'ADVISORY' } }))).toEqual({ id, version: 2 });
    const revisions = await testDb.db.profileRevision.findMany({ where: { profileId: id }, orderBy: { version: 'asc' } });
    expect(revisions.map((r) => [r.version, r.defaultLevel])).toEqual([
      [1, 'CLEAR'],
      [2, 'ADVISORY'],
    ]);
    for (const [who, target] of [
      [other, String(id)],
      [me, defaultId],
    ] as const) {
      refused(await call('config.profile.update', who, { params: { profile_id: target }, body: { name: 'Mine now' } }), 404, 'not_found');
      refused(await call('config.profile.delete', who, { params: { profile_id: target } }), 404, 'not_found');
    }
    expect((ok(await call('config.profile.list', other)).profiles as unknown[]).length).toBe(1);

    const device = light();
    ok(await call('config.sensor.attach', me, { device, body: { tdl_id: 'probe-1', profile_id: id } }), 201);
    expect(refused(await call('config.profile.delete', me, { params: { profile_id: String(id) } }), 409, 'in_use').extra).toEqual({ count: 1 });
    ok(await call('config.sensor.detach', me, { device, params: { device_id: device.device_id, tdl_id: 'probe-1' } }), 204);
    ok(await call('config.profile.delete', me, { params: { profile_id: String(id) } }), 204);
  });

  it('reads every condition back as {metric, op, value}: null with is_null and not_null, whatever was sent', async () => {
    const me = manager();
    const rules = [{ all: [{ metric: 'latest_temp_c', op: 'is_null', value: 3 }, { metric: 'latest_humidity', op: 'not_null' }, { metric: 'latest_breach', op: '==', value: false }], level: 'STALE_DATA' }];
    const { id } = ok(await call('config.profile.create', me, { body: { name: 'Nulls', rules } }), 201) as { id: number };
    const listed = (ok(await call('config.profile.list', me)).profiles as Array<Record<string, unknown>>).find((p) => p.id === id);
    expect(listed?.rules).toEqual([
      {
        all: [
          { metric: 'latest_temp_c', op: 'is_null', value: null },
          { metric: 'latest_humidity', op: 'not_null', value: null },
          { metric: 'latest_breach', op: '==', value: false },
        ],
        level: 'STALE_DATA',
      },
    ]);
  });

  it('answers a profile deleted while a sensor is given it with 409 in_use or 404, never a 500', async () => {
    const me = manager();
    const answer = (reply: ReplyEnvelope) => (reply.ok ? String(reply.status) : `${reply.error.status} ${reply.error.code}`);
    for (let round = 0; round < 20; round += 1) {
      const { id } = ok(await call('config.profile.create', me, { body: { name: `Racing ${round}`, rules: [] } }), 201) as { id: number };
      const [attached, deleted] = await Promise.all([
        call('config.sensor.attach', me, { device: light(), body: { tdl_id: 'race', profile_id: id } }),
        call('config.profile.delete', me, { params: { profile_id: String(id) } }),
      ]);
      const pair = `${answer(attached)} / ${answer(deleted)}`;
      expect(['201 / 409 in_use', '404 not_found / 204']).toContain(pair);
    }
  });

  it('holds at most 50 own profiles, even when created at once', async () => {
    const me = manager();
    const replies = await Promise.all(Array.from({ length: 53 }, (_, k) => call('config.profile.create', me, { body: { name: `P${k}`, rules: [] } })));
    expect(replies.filter((r) => r.ok).length).toBe(50);
    for (const r of replies.filter((r) => !r.ok)) refused(r, 403, 'limit_reached');
  });
});

describe('signals and sensors', () => {
  it('creates signals checked as the light runs them; deleting one in use returns its lights to the default', async () => {
    const me = manager();
    const signals = ok(await call('config.signal.list', me)).alert_signals as Array<Record<string, unknown>>;
    expect(signals).toEqual([expect.objectContaining({ name: 'Default', is_default: true, scope: 'global' })]);
    expect(refused(await call('config.signal.create', me, { body: { name: 'Fast', entries: { ...entries, WARNING: { light: { type: 'Pulse', color: { r: 1, g: 1, b: 1 }, period_s: 0.05 } } } } }), 400, 'validation_error').message).toContain('entries.WARNING.light.period_s');
    const { id } = ok(await call('config.signal.create', me, { body: { name: 'Mine', entries } }), 201) as { id: number };
    const device = light();
    expect(ok(await call('config.device.signal', me, { device, body: { alert_signal_id: id } }))).toEqual({ device_id: device.device_id, alert_signal_id: id });
    expect(ok(await call('config.device.get', me, { device })).alert_signal_id).toBe(id);
    refused(await call('config.device.signal', manager(), { device, body: { alert_signal_id: id } }), 404, 'not_found');
    for (const none of [2 ** 31, 0, -1]) refused(await call('config.device.signal', manager(), { device, body: { alert_signal_id: none } }), 404, 'not_found');
    ok(await call('config.signal.delete', me, { params: { signal_id: String(id) } }), 204);
    expect(ok(await call('config.device.get', me, { device })).alert_signal_id).toBeNull();
    expect(ok(await call('config.device.signal', me, { device, body: { alert_signal_id: signals[0]!.id } }))).toEqual({ device_id: device.device_id, alert_signal_id: null });
  });

  it('keeps both of two changes of one signal made at once, each with its own version', async () => {
    const me = manager();
    for (let round = 0; round < 10; round += 1) {
      const { id } = ok(await call('config.signal.create', me, { body: { name: `Both ${round}`, entries } }), 201) as { id: number };
      const red = { ...entries, CLEAR: solid(255, 0, 0) };
      const [changed, renamed] = await Promise.all([
        call('config.signal.update', me, { params: { signal_id: String(id) }, body: { entries: red } }),
        call('config.signal.update', me, { params: { signal_id: String(id) }, body: { name: `Renamed ${round}` } }),
      ]);
      expect([ok(changed).version, ok(renamed).version].sort()).toEqual([2, 3]);
      const stored = (ok(await call('config.signal.list', me)).alert_signals as Array<Record<string, unknown>>).find((s) => s.id === id);
      expect(stored).toMatchObject({ name: `Renamed ${round}`, version: 3, entries: { CLEAR: red.CLEAR } });
    }
  });

  it('answers a signal changed, chosen or deleted while it is deleted with 404, never a 500', async () => {
    const me = manager();
    const answer = (reply: ReplyEnvelope) => (reply.ok ? String(reply.status) : `${reply.error.status} ${reply.error.code}`);
    for (let round = 0; round < 10; round += 1) {
      const { id } = ok(await call('config.signal.create', me, { body: { name: `Going ${round}`, entries } }), 201) as { id: number };
      const device = light();
      const [changed, chosen, deleted, again] = await Promise.all([
        call('config.signal.update', me, { params: { signal_id: String(id) }, body: { name: `Gone ${round}` } }),
        call('config.device.signal', me, { device, body: { alert_signal_id: id } }),
        call('config.signal.delete', me, { params: { signal_id: String(id) } }),
        call('config.signal.delete', me, { params: { signal_id: String(id) } }),
      ]);
      expect(['200', '404 not_found']).toContain(answer(changed));
      expect(['200', '404 not_found']).toContain(answer(chosen));
      expect([answer(deleted), answer(again)].sort()).toEqual(['204', '404 not_found']);
      // A light that chose the signal before the deletion went back to the default with it.
      expect(ok(await call('config.device.get', me, { device })).alert_signal_id).toBeNull();
    }
  });

  it('attaches once, reports the configuration, and answers 404 for sensors not attached and profiles not visible', async () => {
    const me = manager();
    const device = light();
    const theirs = ok(await call('config.profile.create', manager(), { body: { name: 'Theirs', rules: [] } }), 201) as { id: number };
    refused(await call('config.sensor.attach', me, { device, body: { tdl_id: 'a', profile_id: theirs.id } }), 404, 'not_found');
    // An id past the int4 range names no profile: a miss, not a database error.
    // So does an id of 0 or below.
    for (const none of [1e21, 0, -3]) refused(await call('config.sensor.attach', me, { device, body: { tdl_id: 'a', profile_id: none } }), 404, 'not_found');
    const attached = await call('config.sensor.attach', me, { device, body: { tdl_id: 'room.1:a', label: 'Back room' } });
    expect(ok(attached, 201)).toEqual({ device_id: device.device_id, tdl_id: 'room.1:a', profile_id: null, label: 'Back room' });
    expect(attached.ok && attached.headers).toEqual({ Location: `/v1/devices/${device.device_id}/sensors/room.1%3Aa` });
    refused(await call('config.sensor.attach', me, { device, body: { tdl_id: 'room.1:a' } }), 409, 'already_attached');
    // Already there comes first, whatever profile the repeat names.
    refused(await call('config.sensor.attach', me, { device, body: { tdl_id: 'room.1:a', profile_id: theirs.id } }), 409, 'already_attached');
    refused(await call('config.sensor.attach', me, { device, body: { tdl_id: 'has space' } }), 400, 'validation_error');
    refused(await call('config.sensor.update', me, { device, params: { device_id: device.device_id, tdl_id: 'nope' }, body: { profile_id: null } }), 404, 'not_found');
    refused(await call('config.sensor.update', me, { device, params: { device_id: device.device_id, tdl_id: 'room.1:a' }, body: { profile_id: theirs.id } }), 404, 'not_found');
    refused(await call('config.sensor.detach', me, { device, params: { device_id: device.device_id, tdl_id: 'nope' } }), 404, 'not_found');
    expect(ok(await call('config.device.get', me, { device }))).toEqual({
      device_id: device.device_id,
      name: 'Cold room',
      org_node: { id: 1, parent_id: null, name: 'Root' },
      sensors: [{ tdl_id: 'room.1:a', label: 'Back room', profile: { id: expect.any(Number), name: 'Default', version: 1 }, profile_id: null, level: null }],
      automation_enabled: true,
      alert_signal_id: null,
      alert_level: null,
    });
  });
});

describe('reading retention', () => {
  it('drops readings past the retention but keeps each sensor’s newest, so a silent sensor stays stale', async () => {
    const id = light().device_id;
    const now = Date.now();
    const hours = (h: number) => new Date(now - h * 3_600_000);
    const reading = (tdlId: string, at: Date) => ({ deviceId: id, tdlId, at, tempC: 4, humidity: null, breach: false, receivedAt: at });
    await storeReadings(testDb.db, [reading('silent', hours(80)), reading('silent', hours(72)), reading('live', hours(72)), reading('live', hours(1))]);
    expect(await pruneReadings(testDb.db, hours(48))).toBe(2);
    const left = await testDb.db.reading.findMany({ where: { deviceId: id }, orderBy: { tdlId: 'asc' } });
    expect(left.map((r) => [r.tdlId, r.at.getTime()])).toEqual([
      ['live', hours(1).getTime()],
      ['silent', hours(72).getTime()],
    ]);
  });
});

describe('the org node in a device’s configuration', () => {
  it('shows the parent only when it is in the partner’s scope, as the org tree does', async () => {
    const id = randomDeviceId();
    const child = randomDeviceId();
    registry.described.set(id, { device_id: id, product: 'light', name: 'Cold room', org_node: { id: 9, parent_id: 3, name: 'Site' }, automation_enabled: true });
    registry.described.set(child, { device_id: child, product: 'light', name: 'Freezer', org_node: { id: 12, parent_id: 9, name: 'Room' }, automation_enabled: true });
    registry.orgPaths.set(9, [1, 3, 9]);
    const device = { device_id: id, product: 'light' as const, org_node_id: 9, name: 'Cold room' };
    const inRoom = { device_id: child, product: 'light' as const, org_node_id: 12, name: 'Freezer' };
    const grantedSite = principal({ permissions: ['config_read'], org_grants: [9] });
    const grantedAbove = principal({ permissions: ['config_read'], org_grants: [3, 9] });
    const everywhere = principal({ permissions: ['config_read', 'access_all_devices'], org_grants: [] });
    expect(ok(await call('config.device.get', grantedSite, { device })).org_node).toEqual({ id: 9, parent_id: null, name: 'Site' });
    expect(ok(await call('config.device.get', grantedAbove, { device })).org_node).toEqual({ id: 9, parent_id: 3, name: 'Site' });
    expect(ok(await call('config.device.get', everywhere, { device })).org_node).toEqual({ id: 9, parent_id: 3, name: 'Site' });
    // A node below the granted root: its parent is in scope, and no path is asked.
    const asked = registry.requests.filter((r) => r.subject === 'registry.org.paths').length;
    expect(ok(await call('config.device.get', grantedSite, { device: inRoom })).org_node).toEqual({ id: 12, parent_id: 9, name: 'Room' });
    expect(registry.requests.filter((r) => r.subject === 'registry.org.paths')).toHaveLength(asked);
  });
});

describe('evaluation and automation', () => {
  async function relay(deviceId: string, tdlId: string, reading: { temp_c: number | null; humidity?: number | null; breach: boolean; at?: number }): Promise<void> {
    const h = natsHeaders();
    h.set('Mqtt-Topic', `light/${deviceId}/tdl/${tdlId}`);
    h.set('Received-At', new Date().toISOString());
    const body = { humidity: null, at: Math.floor(Date.now() / 1000), ...reading };
    await bus.connection.jetstream().publish(`dev.in.light.${deviceId}.tdl.${tdlId.replace(/\./g, '_')}`, Buffer.from(JSON.stringify(body)), { headers: h });
  }

  const cycle = (overrides: { periodMs?: number; leaseMs?: number; owner?: string; lights?: AutomationWriter } = {}) =>
    new EvaluationCycle({
      db: testDb.db,
      lights: overrides.lights ?? new LightClient(bus, { timeoutMs: 1000, logger }),
      registry: new RegistryClient(bus, { timeoutMs: 1000, logger }),
      logger,
      owner: overrides.owner,
      settings: { periodMs: overrides.periodMs ?? 400, shards: 4, leaseMs: overrides.leaseMs ?? 2000, windowMs: 3_600_000, retentionMs: 86_400_000, callTimeoutMs: 1000 },
    });

  it('stores each reading once, moves the level on a breach and writes exactly the signal entry to light1, never while automation is off', async () => {
    const me = manager();
    const device = light();
    const id = device.device_id;
    const { id: profileId } = ok(await call('config.profile.create', me, { body: { name: 'Hot', rules: [hotRule], default: 'CLEAR' } }), 201) as { id: number };
    const { id: signalId } = ok(await call('config.signal.create', me, { body: { name: 'Bright', entries } }), 201) as { id: number };
    ok(await call('config.sensor.attach', me, { device, body: { tdl_id: 'fridge.1', profile_id: profileId } }), 201);
    ok(await call('config.device.signal', me, { device, body: { alert_signal_id: signalId } }));
    const at = Math.floor(Date.now() / 1000) - 60;
    await relay(id, 'fridge.1', { temp_c: 4, breach: false, at });
    await relay(id, 'fridge.1', { temp_c: 4, breach: false, at }); // redelivered: stored once
    await waitFor(async () => (await testDb.db.reading.count({ where: { deviceId: id } })) === 1, { what: 'the reading stored' });

    const evaluator = cycle();
    evaluator.start();
    try {
      await waitFor(() => lights.writesTo(id).includes('solid:008000'), { timeoutMs: 10_000, what: 'the CLEAR entry on light1' });
      await relay(id, 'fridge.1', { temp_c: 9.5, breach: true, at: at + 20 });
      await waitFor(() => lights.writesTo(id).at(-1) === 'pulse:FF0000,500', { timeoutMs: 10_000, what: 'the WARNING entry on light1' });
      expect(ok(await call('config.device.get', me, { device }))).toMatchObject({ alert_level: 'WARNING', sensors: [{ tdl_id: 'fridge.1', level: 'WARNING' }] });

      // Automation off: a level change writes nothing.
      registry.described.set(id, { ...registry.described.get(id)!, automation_enabled: false });
      const before = lights.writesTo(id).length;
      await relay(id, 'fridge.1', { temp_c: 3, breach: false, at: at + 40 });
      await waitFor(async () => (await testDb.db.alertState.findUnique({ where: { deviceId: id } }))?.level === 'CLEAR', { timeoutMs: 10_000, what: 'the level back to CLEAR' });
      const changedIn = evaluator.cycleAt(new Date());
      await waitFor(async () => (await testDb.db.alertState.findUniqueOrThrow({ where: { deviceId: id } })).evaluatedCycle > changedIn + 1n, { timeoutMs: 10_000, what: 'two more cycles' });
      expect(lights.writesTo(id).length).toBe(before);
      // On again: the pending write goes out.
      registry.described.set(id, { ...registry.described.get(id)!, automation_enabled: true });
      await waitFor(() => lights.writesTo(id).at(-1) === 'solid:008000', { timeoutMs: 10_000, what: 'the CLEAR entry once automation is back' });

      // The signal deleted: the default signal's CLEAR entry.
      ok(await call('config.signal.delete', me, { params: { signal_id: String(signalId) } }), 204);
      await waitFor(() => lights.writesTo(id).at(-1) === 'solid:00FF00', { timeoutMs: 10_000, what: 'the default CLEAR entry' });
      expect(lights.writes.every((w) => w.device_id !== id || !w.payload.includes('@'))).toBe(true);
    } finally {
      await evaluator.stop();
    }
  }, 60_000);

  it('reads the automation switch again before each group of writes: turned off meanwhile, the lights left are not written', async () => {
    const me = manager();
    const devices = Array.from({ length: 20 }, () => light());
    const ids = devices.map((d) => d.device_id);
    const automation = (on: boolean) => {
      for (const id of ids) registry.described.set(id, { ...registry.described.get(id)!, automation_enabled: on });
    };
    automation(false);
    for (const device of devices) ok(await call('config.sensor.attach', me, { device, body: { tdl_id: 'probe' } }), 201);
    // Evaluated while automation is off: each light's entry is due, none written.
    const evaluating = cycle();
    evaluating.start();
    try {
      await waitFor(async () => (await testDb.db.alertState.count({ where: { deviceId: { in: ids } } })) === ids.length, { timeoutMs: 10_000, what: 'every light evaluated' });
    } finally {
      await evaluating.stop();
    }
    automation(true);
    // The partners turn automation off just as the first write goes out.
    const inner = new LightClient(bus, { timeoutMs: 1000, logger });
    let writes = 0;
    const switchingOff: AutomationWriter = {
      writeAutomation: async (ctx, deviceId, payload) => {
        writes += 1;
        if (writes === 1) automation(false);
        return inner.writeAutomation(ctx, deviceId, payload);
      },
    };
    const writer = cycle({ lights: switchingOff });
    // The group in flight (16) goes out; the four after it are not written.
    expect(await writer.writeDue(ids, writer.cycleAt(new Date()))).toBe(16);
    expect(writes).toBe(16);
  }, 30_000);

  it('writes the chosen signal when it is chosen while a cycle writes the entry it read before', async () => {
    const me = manager();
    const device = light();
    const id = device.device_id;
    const { id: signalId } = ok(await call('config.signal.create', me, { body: { name: `Chosen late ${id}`, entries } }), 201) as { id: number };
    ok(await call('config.sensor.attach', me, { device, body: { tdl_id: 'probe' } }), 201);
    // The signal is chosen after the cycle picked the light's entry (the default signal's) and
    // before that write is recorded.
    const inner = new LightClient(bus, { timeoutMs: 1000, logger });
    let chosen = false;
    const lightsChoosingMidWrite: AutomationWriter = {
      writeAutomation: async (ctx, deviceId, payload) => {
        if (deviceId === id && !chosen) {
          chosen = true;
          ok(await call('config.device.signal', me, { device, body: { alert_signal_id: signalId } }));
        }
        return inner.writeAutomation(ctx, deviceId, payload);
      },
    };
    const evaluator = cycle({ lights: lightsChoosingMidWrite });
    evaluator.start();
    try {
      await waitFor(() => lights.writesTo(id).at(-1) === 'solid:000040', { timeoutMs: 10_000, what: "the chosen signal's NO_DATA entry on light1" });
    } finally {
      await evaluator.stop();
    }
    expect(lights.writesTo(id)[0]).toBe('pulse:0000FF,2000'); // the default signal's, chosen before
  }, 30_000);

  it('judges a light whose only sensor was detached before any cycle NO_SENSORS, as one detached after; the read shows the last evaluation until then', async () => {
    const me = manager();
    const early = light();
    const late = light();
    const detach = (device: ReturnType<typeof light>) => call('config.sensor.detach', me, { device, params: { device_id: device.device_id, tdl_id: 'probe' } });
    const read = async (device: ReturnType<typeof light>) => ok(await call('config.device.get', me, { device }));
    // `late` is evaluated with its sensor, then no cycle runs while both lose theirs.
    ok(await call('config.sensor.attach', me, { device: late, body: { tdl_id: 'probe' } }), 201);
    const first = cycle();
    first.start();
    try {
      await waitFor(async () => (await read(late)).alert_level === 'INSUFFICENT_DATA', { timeoutMs: 10_000, what: 'the first evaluation' });
    } finally {
      await first.stop();
    }
    ok(await call('config.sensor.attach', me, { device: early, body: { tdl_id: 'probe' } }), 201);
    ok(await detach(early), 204);
    ok(await detach(late), 204);
    // Before the next cycle the read shows the level of the last evaluation (the one light1 and the
    // events show): the one from before the detach, and none for a light no cycle has evaluated.
    expect(await read(early)).toMatchObject({ sensors: [], alert_level: null });
    expect(await read(late)).toMatchObject({ sensors: [], alert_level: 'INSUFFICENT_DATA' });

    const evaluator = cycle();
    evaluator.start();
    try {
      for (const device of [early, late]) {
        await waitFor(async () => (await read(device)).alert_level === 'NO_SENSORS', { timeoutMs: 10_000, what: `${device.device_id} NO_SENSORS` });
        // The default signal's NO_DATA entry (pulsing blue) on light1.
        await waitFor(() => lights.writesTo(device.device_id).at(-1) === 'pulse:0000FF,2000', { timeoutMs: 10_000, what: `NO_DATA on ${device.device_id}'s light1` });
      }
    } finally {
      await evaluator.stop();
    }
    expect(await read(early)).toMatchObject({ sensors: [], alert_level: 'NO_SENSORS' });
    expect(lights.writesTo(early.device_id)).toEqual(['pulse:0000FF,2000']);
  }, 60_000);

  it('evaluates each device once per cycle when two replicas share the cycles and one stops holding its shards', async () => {
    const me = manager();
    const devices = Array.from({ length: 12 }, () => light());
    for (const device of devices) ok(await call('config.sensor.attach', me, { device, body: { tdl_id: 't' } }), 201);
    const a = cycle({ periodMs: 600, leaseMs: 300, owner: 'replica-a' });
    const b = cycle({ periodMs: 600, leaseMs: 300, owner: 'replica-b' });
    a.start();
    b.start();
    const ids = devices.map((d) => d.device_id);
    const states = async () => testDb.db.alertState.findMany({ where: { deviceId: { in: ids } } });
    await waitFor(async () => (await states()).length === ids.length && (await states()).every((s) => s.evaluations >= 3), { timeoutMs: 20_000, what: 'three cycles' });
    // A replica that dies holds its claims until the lease runs out; the other takes them over.
    await a.stop();
    const stopAt = a.cycleAt(new Date());
    await waitFor(async () => (await states()).every((s) => s.evaluatedCycle >= stopAt + 2n), { timeoutMs: 20_000, what: 'two more cycles on one replica' });
    await b.stop();
    for (const s of await states()) {
      expect(s.evaluations).toBe(Number(s.evaluatedCycle - s.firstCycle) + 1);
      expect(s.level).toBe('INSUFFICENT_DATA');
    }
  }, 60_000);
});
