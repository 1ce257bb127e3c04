import { headers as natsHeaders, RetentionPolicy, StorageType } from 'nats';
import type { Principal, ReplyEnvelope } from '@fleet/contracts';
import { ensureStream, eventStreamPlan, publishDurable, type Bus } from '@fleet/service-kit';
import { BridgeStandIn, randomDeviceId, uniqueId, waitFor } from '@fleet/test-kit';
import { AdminError, runAdminCommand } from '../src/admin/commands';
import { BridgeClient } from '@fleet/bridge-client';
import { forgetRemovedDevices } from '../src/handlers/device-events';
import { serveLight, type LightSubject } from '../src/handlers/light';
import { stateConsumer } from '../src/handlers/state-consumer';
import type { DurablePullConsumer } from '@fleet/service-kit';
import { connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb } from './support';

let nats: PrivateNats;
let testDb: TestDb;
let bus: Bus;
let bridge: BridgeStandIn;
let consumer: DurablePullConsumer;
let removals: DurablePullConsumer;
const STREAM = 'DEVICE_IN';
const TOPIC_ROOT = 'lt';

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  bus = await connectBus(nats.url);
  bridge = new BridgeStandIn(bus.connection);
  serveLight(bus, { db: testDb.db, publisher: new BridgeClient(bus, { timeoutMs: 500, logger }), topicRoot: TOPIC_ROOT, logger });
  const jsm = await bus.connection.jetstreamManager();
  await ensureStream(jsm, eventStreamPlan('REGISTRY_EVENTS'), logger);
  removals = forgetRemovedDevices(bus.connection, testDb.db, logger, uniqueId('removals'));
  removals.start();
  await jsm.streams.add({ name: STREAM, subjects: ['dev.in.>'], retention: RetentionPolicy.Limits, storage: StorageType.Memory });
  consumer = stateConsumer(bus.connection, testDb.db, { stream: STREAM, durable: uniqueId('state'), filterSubject: 'dev.in.light.*.state.>' }, logger);
  consumer.start();
});

afterAll(async () => {
  await consumer?.stop();
  await removals?.stop();
  bridge?.close();
  await bus?.drain();
  await testDb?.drop();
  await nats?.stop();
});

beforeEach(() => {
  bridge.reset();
});

const light = (id = randomDeviceId()) => ({ device_id: id, product: 'light' as const, org_node_id: null, name: null });

async function call(
  subject: LightSubject,
  p: Principal,
  parts: { device?: ReturnType<typeof light> | { device_id: string; product: 'meter'; org_node_id: null; name: null }; params?: Record<string, string>; body?: Record<string, unknown> } = {},
): Promise<ReplyEnvelope> {
  return bus.request(subject, {
    request_id: uniqueId('req'),
    principal: p,
    params: parts.params ?? {},
    query: {},
    ...(parts.device ? { device: parts.device } : {}),
    ...(parts.body ? { body: parts.body } : {}),
  });
}

function expectError(reply: ReplyEnvelope, status: number, code: string): { message: string; required_permission?: string } {
  if (reply.ok) throw new Error(`expected ${status} ${code}, got success ${JSON.stringify(reply)}`);
  expect({ status: reply.error.status, code: reply.error.code }).toEqual({ status, code });
  return reply.error;
}

function body(reply: ReplyEnvelope, status: number): Record<string, unknown> {
  if (!reply.ok) throw new Error(`expected ${status}, got ${JSON.stringify(reply.error)}`);
  expect(reply.status).toBe(status);
  return reply.body as Record<string, unknown>;
}

const admin = (argv: string) => runAdminCommand(testDb.db, argv.split(' '));

describe('raw commands', () => {
  const raw = principal({ permissions: ['raw_commands'] });

  test('202 once the broker took it; the payload goes to <root>/<id>/cmd/<channel> byte for byte, QoS 1, not retained', async () => {
    const device = light();
    const reply = await call('light.command.raw', raw, { device, body: { channel: 'light1', payload: 'pulse:ff0000,1200' } });
    expect(body(reply, 202)).toEqual({ channel: 'light1', payload: 'pulse:ff0000,1200', command: 'raw' });
    expect(bridge.published).toEqual([{ topic: `${TOPIC_ROOT}/${device.device_id}/cmd/light1`, payload: 'pulse:ff0000,1200', qos: 1, retain: false }]);
  });

  test('every channel', async () => {
    const device = light();
    for (const [channel, payload] of [
      ['light2', 'solid:FF0000@5000/60000'],
      ['light3', 'togglesolid:5000,FF0000,0000FF,400,25,00FF00,0'],
      ['sound', 'play:chime.mp3,50,2'],
      ['contact', 'pulse:500'],
    ]) {
      expect(body(await call('light.command.raw', raw, { device, body: { channel, payload } }), 202)).toMatchObject({ channel, payload });
    }
    expect(bridge.published.map((p) => p.topic.split('/').pop())).toEqual(['light2', 'light3', 'sound', 'contact']);
  });

  test('the grammar is always enforced: 400, nothing sent', async () => {
    const relaxed = principal({ permissions: ['raw_commands', 'relaxed_caps'] });
    for (const payload of ['blink:FF0000', 'pulse:FF0000,19', 'solid:FF0000@1000/0', '']) {
      const err = expectError(await call('light.command.raw', relaxed, { device: light(), body: { channel: 'light1', payload } }), 400, 'validation_error');
      expect(err.message).toMatch(/payload/);
    }
    expectError(await call('light.command.raw', relaxed, { device: light(), body: { channel: 'light9', payload: 'off' } }), 400, 'validation_error');
    expect(bridge.published).toEqual([]);
  });

  test('availability caps apply unless the partner holds relaxed_caps', async () => {
    for (const [channel, payload] of [
      ['light1', 'pulse:FF0000,99'],
      ['light2', 'solid:FF0000@600001/0'],
      ['light3', 'solid:FF0000@1000/9999'],
      ['contact', 'pulse:10001'],
    ]) {
      const err = expectError(await call('light.command.raw', raw, { device: light(), body: { channel, payload } }), 400, 'validation_error');
      expect(err.message).toMatch(/availability cap/);
      const relaxed = principal({ permissions: ['raw_commands', 'relaxed_caps'] });
      expect(body(await call('light.command.raw', relaxed, { device: light(), body: { channel, payload } }), 202)).toMatchObject({ payload });
    }
    expect(bridge.published.map((p) => p.payload)).toEqual(['pulse:FF0000,99', 'solid:FF0000@600001/0', 'solid:FF0000@1000/9999', 'pulse:10001']);
    // both sides of the period cap without relaxed_caps
    expect(body(await call('light.command.raw', raw, { device: light(), body: { channel: 'light1', payload: 'pulse:FF0000,100' } }), 202)).toBeDefined();
  });

  test('a channel the partner may not command is 403 forbidden without required_permission, checked before the payload', async () => {
    const limited = principal({ permissions: ['raw_commands', 'relaxed_caps', 'access_all_devices'], allowed_channels: ['light1'] });
    for (const payload of ['solid:FF0000', 'nonsense']) {
      const err = expectError(await call('light.command.raw', limited, { device: light(), body: { channel: 'sound', payload } }), 403, 'forbidden');
      expect(err.required_permission).toBeUndefined();
    }
    expect(bridge.published).toEqual([]);
  });

  test('503 publish_failed when the broker did not take it, or the bridge does not answer', async () => {
    bridge.mode = 'refuse';
    expectError(await call('light.command.raw', raw, { device: light(), body: { channel: 'light1', payload: 'off' } }), 503, 'publish_failed');
    bridge.mode = 'silent';
    expectError(await call('light.command.raw', raw, { device: light(), body: { channel: 'light1', payload: 'off' } }), 503, 'publish_failed');
  });

  test('a device that is not a light is 404', async () => {
    const meter = { device_id: randomDeviceId(), product: 'meter' as const, org_node_id: null, name: null };
    expectError(await call('light.command.raw', raw, { device: meter, body: { channel: 'light1', payload: 'off' } }), 404, 'not_found');
  });
});

describe('the automation writer', () => {
  const write = (body: Record<string, unknown>) => bus.request('light.automation.write', { request_id: uniqueId('auto'), params: {}, query: {}, body } as never);

  it('publishes an alert signal entry on light1 only, at QoS 1, and answers what the broker took', async () => {
    const id = randomDeviceId();
    const reply = body(await write({ device_id: id, payload: 'pulse:0000FF,1000' }), 200);
    expect(reply).toMatchObject({ device_id: id, channel: 'light1', payload: 'pulse:0000FF,1000' });
    expect(bridge.published).toEqual([{ topic: `${TOPIC_ROOT}/${id}/cmd/light1`, payload: 'pulse:0000FF,1000', qos: 1, retain: false }]);
  });

  it('refuses a payload the light would not run, or one over the availability caps, and sends nothing', async () => {
    expect(expectError(await write({ device_id: randomDeviceId(), payload: 'blink:red' }), 400, 'validation_error').message).toMatch(/payload/);
    expect(expectError(await write({ device_id: randomDeviceId(), payload: 'pulse:0000FF,50' }), 400, 'validation_error').message).toMatch(/relaxed_caps|100/);
    expect(bridge.published).toEqual([]);
  });

  it('is 503 publish_failed when the broker does not take it', async () => {
    bridge.mode = 'refuse';
    expectError(await write({ device_id: randomDeviceId(), payload: 'solid:00FF00' }), 503, 'publish_failed');
  });
});

type CatalogAnswer = { commands: Array<{ name: string; channels: string[]; parameters: Array<Record<string, unknown>> }> };
const catalogOf = async (p: Principal) => body(await call('light.command.catalog', p), 200) as CatalogAnswer;
const CATALOG_NAMES = [
  'off',
  'solid',
  'pulse',
  'chase',
  'toggle',
  'bluchase',
  'pulse_then_solid',
  'chase_then_solid',
  'toggle_then_solid',
  'sound_play',
  'sound_stop',
  'contact_on',
  'contact_pulse',
];

describe('the catalog and effects', () => {
  test('a partner holding predefined_commands has the whole catalog with its bounds, and runs any effect, with no staff step', async () => {
    const p = principal({ permissions: ['predefined_commands'] });
    const { commands } = await catalogOf(p);
    expect(commands.map((c) => c.name)).toEqual(CATALOG_NAMES);
    const pulse = commands.find((c) => c.name === 'pulse');
    expect(pulse?.channels).toEqual(['light1', 'light2', 'light3']);
    expect(pulse?.parameters.find((x) => x.name === 'period_s')).toMatchObject({ min: 0.1, max: 9.999, default: 1, step: 0.001 });
    expect(commands.find((c) => c.name === 'sound_play')?.parameters.find((x) => x.name === 'volume')).toMatchObject({ min: 0, max: 100, default: 50 });
    const device = light();
    for (const [channel, command, params, payload] of [
      ['light1', 'pulse', { period_s: 9.999 }, 'pulse:0000FF,9999'],
      ['light3', 'bluchase', { brightness_pct: 99 }, 'bluchase:1000,99@5000/60000'],
      ['sound', 'sound_play', { volume: 100, count: 100 }, 'play:chime.mp3,100,100'],
      ['contact', 'contact_pulse', { pulse_s: 10 }, 'pulse:10000'],
    ] as const) {
      expect(body(await call('light.effect.apply', p, { device, params: { channel }, body: { command, params } }), 202)).toEqual({ channel, command });
      expect(bridge.published.at(-1)).toEqual({ topic: `${TOPIC_ROOT}/${device.device_id}/cmd/${channel}`, payload, qos: 1, retain: false });
    }
  });

  test('GET /v1/commands shows the account’s effective bounds and channels', async () => {
    const p = principal({ permissions: ['predefined_commands'], allowed_channels: ['light1', 'light2', 'sound'] });
    await admin(`command grant --partner ${p.partner_id} --command pulse --bound period_s=0.5:2:1.5 --bound duration_s=1:30`);
    const { commands } = await catalogOf(p);
    expect(commands.map((c) => c.name)).toEqual(CATALOG_NAMES);
    const pulse = commands.find((c) => c.name === 'pulse');
    const sound = commands.find((c) => c.name === 'sound_play');
    expect(pulse?.channels).toEqual(['light1', 'light2']);
    expect(pulse?.parameters.find((x) => x.name === 'period_s')).toMatchObject({ min: 0.5, max: 2, default: 1.5 });
    expect(pulse?.parameters.find((x) => x.name === 'duration_s')).toMatchObject({ min: 1, max: 30, default: 5 });
    expect(commands.find((c) => c.name === 'chase')?.parameters.find((x) => x.name === 'period_s')).toMatchObject({ min: 0.1, max: 9.999, default: 0.5 });
    expect(sound?.channels).toEqual(['sound']);
    expect(commands.find((c) => c.name === 'contact_on')?.channels).toEqual([]);
  });

  test('an effect runs within narrowed bounds; out of range is 400 naming the field, never clamped', async () => {
    const p = principal({ permissions: ['predefined_commands'] });
    await admin(`command grant --partner ${p.partner_id} --command pulse --bound period_s=0.5:2`);
    const device = light();
    const ok = await call('light.effect.apply', p, { device, params: { channel: 'light1' }, body: { command: 'pulse', params: { color: 'FF0000', period_s: 2 } } });
    expect(body(ok, 202)).toEqual({ channel: 'light1', command: 'pulse' });
    expect(bridge.published).toEqual([{ topic: `${TOPIC_ROOT}/${device.device_id}/cmd/light1`, payload: 'pulse:FF0000,2000', qos: 1, retain: false }]);
    for (const [params, field] of [
      [{ period_s: 2.001 }, 'params.period_s'],
      [{ period_s: 0.4 }, 'params.period_s'],
      [{ period_s: 0.05 }, 'params.period_s'],
      [{ colour: 'FF0000' }, 'params.colour'],
      [{ duration_s: 5 }, 'params.duration_s'],
    ] as const) {
      const err = expectError(await call('light.effect.apply', p, { device, params: { channel: 'light1' }, body: { command: 'pulse', params } }), 400, 'validation_error');
      expect(err.message).toContain(field);
    }
    // Other commands keep the catalog's bounds.
    expect(body(await call('light.effect.apply', p, { device, params: { channel: 'light1' }, body: { command: 'chase', params: { period_s: 0.1 } } }), 202)).toEqual({
      channel: 'light1',
      command: 'chase',
    });
    expect(bridge.published).toHaveLength(2);
  });

  test('on light2/light3 the effect is a repeating overlay; payload only with raw_commands', async () => {
    const p = principal({ permissions: ['predefined_commands', 'raw_commands'] });
    const device = light();
    const reply = await call('light.effect.apply', p, {
      device,
      params: { channel: 'light2' },
      body: { command: 'chase', params: { color: '00FF00', period_s: 0.5, width: 4, duration_s: 10, interval_s: 120 } },
    });
    expect(body(reply, 202)).toEqual({ channel: 'light2', command: 'chase', payload: 'chase:00FF00,500,4@10000/120000' });
    expect(bridge.published[0]).toMatchObject({ topic: `${TOPIC_ROOT}/${device.device_id}/cmd/light2`, payload: 'chase:00FF00,500,4@10000/120000' });
    const caps = await call('light.effect.apply', p, { device, params: { channel: 'light3' }, body: { command: 'chase', params: { interval_s: 5 } } });
    expect(expectError(caps, 400, 'validation_error').message).toContain('params.interval_s');
  });

  test('channel access first (403 without required_permission), then the command (400 unknown, 400 wrong channel)', async () => {
    const p = principal({ permissions: ['predefined_commands'], allowed_channels: ['light1', 'sound'] });
    const device = light();
    const refused = expectError(await call('light.effect.apply', p, { device, params: { channel: 'light2' }, body: { command: 'pulse' } }), 403, 'forbidden');
    expect(refused.required_permission).toBeUndefined();
    expectError(await call('light.effect.apply', p, { device, params: { channel: 'light1' }, body: { command: 'sparkle' } }), 400, 'validation_error');
    expect(expectError(await call('light.effect.apply', p, { device, params: { channel: 'sound' }, body: { command: 'pulse' } }), 400, 'validation_error').message).toMatch(
      /does not run on sound/,
    );
    expect(body(await call('light.effect.apply', p, { device, params: { channel: 'sound' }, body: { command: 'sound_play', params: { volume: 70 } } }), 202)).toEqual({
      channel: 'sound',
      command: 'sound_play',
    });
    expect(bridge.published.map((x) => x.payload)).toEqual(['play:chime.mp3,70,1']);
  });

  test('a withdrawn command leaves the list and is 403 without required_permission, before its parameters; granting or resetting gives it back', async () => {
    const p = principal({ permissions: ['predefined_commands'] });
    const device = light();
    expect(await admin(`command revoke --partner ${p.partner_id} --command pulse`)).toEqual({ partner_id: p.partner_id, withdrawn: ['pulse'] });
    expect((await catalogOf(p)).commands.map((c) => c.name)).toEqual(CATALOG_NAMES.filter((n) => n !== 'pulse'));
    for (const params of [{}, { period_s: 99 }]) {
      const err = expectError(await call('light.effect.apply', p, { device, params: { channel: 'light1' }, body: { command: 'pulse', params } }), 403, 'forbidden');
      expect(err.required_permission).toBeUndefined();
    }
    // Another partner keeps it.
    expect(body(await call('light.effect.apply', principal({ permissions: ['predefined_commands'] }), { device, params: { channel: 'light1' }, body: { command: 'pulse' } }), 202)).toBeDefined();
    expect(bridge.published).toHaveLength(1);

    await admin(`command grant --partner ${p.partner_id} --command pulse`);
    expect((await catalogOf(p)).commands.map((c) => c.name)).toEqual(CATALOG_NAMES);
    await admin(`command revoke --partner ${p.partner_id} --command pulse`);
    expect(await admin(`command reset --partner ${p.partner_id} --command pulse`)).toEqual({ partner_id: p.partner_id, restored: ['pulse'] });
    expect(body(await call('light.effect.apply', p, { device, params: { channel: 'light1' }, body: { command: 'pulse' } }), 202)).toEqual({ channel: 'light1', command: 'pulse' });
  });

  test('revoke --all withdraws the whole catalog; grant --all and reset restore it', async () => {
    const p = principal({ permissions: ['predefined_commands'] });
    expect(await admin(`command revoke --partner ${p.partner_id} --all`)).toEqual({ partner_id: p.partner_id, withdrawn: CATALOG_NAMES });
    expect(await catalogOf(p)).toEqual({ commands: [] });
    expectError(await call('light.effect.apply', p, { device: light(), params: { channel: 'contact' }, body: { command: 'off' } }), 403, 'forbidden');
    expect(await admin(`command grant --partner ${p.partner_id} --all`)).toEqual({ partner_id: p.partner_id, granted: CATALOG_NAMES });
    expect((await catalogOf(p)).commands.map((c) => c.name)).toEqual(CATALOG_NAMES);
    await admin(`command revoke --partner ${p.partner_id} --all`);
    expect(await admin(`command reset --partner ${p.partner_id}`)).toEqual({ partner_id: p.partner_id, restored: [...CATALOG_NAMES].sort() });
    expect((await catalogOf(p)).commands.map((c) => c.name)).toEqual(CATALOG_NAMES);
  });

  test('publish failure is 503', async () => {
    const p = principal({ permissions: ['predefined_commands'] });
    bridge.mode = 'refuse';
    expectError(await call('light.effect.apply', p, { device: light(), params: { channel: 'contact' }, body: { command: 'off' } }), 503, 'publish_failed');
  });
});

describe('state', () => {
  async function report(deviceId: string, channel: string, payload: string, at: Date): Promise<void> {
    const h = natsHeaders();
    h.set('Mqtt-Topic', `light/${deviceId}/state/${channel}`);
    h.set('Received-At', at.toISOString());
    await bus.connection.jetstream().publish(`dev.in.light.${deviceId}.state.${channel}`, Buffer.from(payload), { headers: h });
  }

  test('the last state each permitted channel reported, with its label; payload only with raw_commands', async () => {
    const id = randomDeviceId();
    const t0 = new Date(Date.now() - 60_000);
    await report(id, 'light1', 'pulse:FF0000,1200', t0);
    await report(id, 'light2', 'solid:00FF00@5000/60000', t0);
    await report(id, 'sound', '', t0);
    await report(id, 'contact', 'on', t0);
    const reader = principal({ permissions: ['state_read'], allowed_channels: ['light1', 'light2', 'sound'] });
    const state = await waitFor(
      async () => {
        const b = body(await call('light.state.get', reader, { device: light(id) }), 200) as { state: Record<string, unknown> };
        return Object.keys(b.state).length === 3 ? b : undefined;
      },
      { what: 'three state entries' },
    );
    expect(state).toEqual({
      device_id: id,
      state: {
        light1: { label: 'Pulse #FF0000 every 1.2 s', updated_at: t0.toISOString() },
        light2: { label: 'Overlay: Solid #00FF00 for 5 s every 60 s', updated_at: t0.toISOString() },
        sound: { label: 'Off', updated_at: t0.toISOString() },
      },
    });
    const rawReader = principal({ permissions: ['state_read', 'raw_commands'], allowed_channels: ['contact'] });
    expect(body(await call('light.state.get', rawReader, { device: light(id) }), 200)).toEqual({
      device_id: id,
      state: { contact: { label: 'On', updated_at: t0.toISOString(), payload: 'on' } },
    });
  });

  test('a newer report replaces the state; an older one (redelivered, out of order) does not', async () => {
    const id = randomDeviceId();
    const reader = principal({ permissions: ['state_read', 'raw_commands'] });
    const t1 = new Date(Date.now() - 10_000);
    await report(id, 'light1', 'solid:FF0000', t1);
    await report(id, 'light1', 'off', new Date(t1.getTime() - 5_000));
    await report(id, 'light1', 'bluchase:800,80', new Date(t1.getTime() + 1_000));
    await report(id, 'light3', 'off', new Date(t1.getTime() + 2_000));
    const state = await waitFor(
      async () => {
        const b = body(await call('light.state.get', reader, { device: light(id) }), 200) as { state: Record<string, { payload: string; label: string }> };
        return b.state.light3 ? b.state : undefined;
      },
      { what: 'the light3 report' },
    );
    expect(state.light1).toEqual({ label: 'Blue chase every 0.8 s at 80% brightness', updated_at: new Date(t1.getTime() + 1_000).toISOString(), payload: 'bluchase:800,80' });
  });

  test('a removed device’s states are forgotten; other changes keep them', async () => {
    const id = randomDeviceId();
    const other = randomDeviceId();
    const reader = principal({ permissions: ['state_read'] });
    await report(id, 'light1', 'solid:FF0000', new Date());
    await report(other, 'light1', 'solid:FF0000', new Date());
    const stateOf = async (deviceId: string) => (body(await call('light.state.get', reader, { device: light(deviceId) }), 200) as { state: Record<string, unknown> }).state;
    await waitFor(async () => Object.keys(await stateOf(id)).length === 1 && Object.keys(await stateOf(other)).length === 1, { what: 'both states' });
    await publishDurable(bus.connection, 'evt.registry.device.changed.v1', { device_id: id, change: 'moved', at: new Date().toISOString() });
    await publishDurable(bus.connection, 'evt.registry.device.changed.v1', { device_id: id, change: 'removed', at: new Date().toISOString() });
    await waitFor(async () => Object.keys(await stateOf(id)).length === 0, { what: 'the removed device’s state to go' });
    expect(Object.keys(await stateOf(other))).toEqual(['light1']);
  });

  test('removals published while light-command was not reading are applied when it reads again, in order, and only to states reported before', async () => {
    const id = randomDeviceId();
    const reader = principal({ permissions: ['state_read'] });
    const stateOf = async (deviceId: string) => (body(await call('light.state.get', reader, { device: light(deviceId) }), 200) as { state: Record<string, unknown> }).state;
    await report(id, 'light1', 'solid:FF0000', new Date(Date.now() - 60_000));
    await waitFor(async () => Object.keys(await stateOf(id)).length === 1, { what: 'the first state' });
    await removals.stop();
    const removedAt = new Date(Date.now() - 30_000);
    await publishDurable(bus.connection, 'evt.registry.device.changed.v1', { device_id: id, change: 'removed', at: removedAt.toISOString() });
    // The id provisioned again reports after the removal, while the removal is still unread.
    await report(id, 'light2', 'solid:00FF00', new Date());
    await waitFor(async () => Object.keys(await stateOf(id)).length === 2, { what: 'both states before the removal is read' });
    removals.start();
    await waitFor(async () => Object.keys(await stateOf(id)).join() === 'light2', { what: 'the state reported before the removal to go' });
  });

  test('a light that never reported has an empty state', async () => {
    expect(body(await call('light.state.get', principal({ permissions: ['state_read'] }), { device: light() }), 200)).toMatchObject({ state: {} });
  });
});

describe('admin commands', () => {
  type Listed = { commands: Array<{ name: string; narrowed: unknown; narrowed_at?: string; parameters: Array<Record<string, unknown>> }>; withdrawn: string[] };
  const list = async (id: string) => (await admin(`command list --partner ${id}`)) as unknown as Listed;

  test('list shows the catalog a partner has: everything, with what was narrowed and what was withdrawn', async () => {
    const id = crypto.randomUUID();
    const fresh = await list(id);
    expect(fresh.commands.map((c) => c.name)).toEqual(CATALOG_NAMES);
    expect(fresh.commands.every((c) => JSON.stringify(c.narrowed) === '{}' && c.narrowed_at === undefined)).toBe(true);
    expect(fresh.withdrawn).toEqual([]);

    expect(await admin(`command grant --partner ${id} --command toggle --bound duty_ratio=0.2:0.8`)).toEqual({
      partner_id: id,
      granted: ['toggle'],
      bounds: { duty_ratio: { min: 0.2, max: 0.8 } },
    });
    await admin(`command revoke --partner ${id} --command sound_play`);
    const listed = await list(id);
    expect(listed.commands.map((c) => c.name)).toEqual(CATALOG_NAMES.filter((n) => n !== 'sound_play'));
    const toggle = listed.commands.find((c) => c.name === 'toggle');
    expect(toggle?.narrowed).toEqual({ duty_ratio: { min: 0.2, max: 0.8 } });
    expect(Date.parse(toggle?.narrowed_at ?? '')).toBeGreaterThan(Date.now() - 60_000);
    expect(toggle?.parameters.find((p) => p.name === 'duty_ratio')).toMatchObject({ min: 0.2, max: 0.8, default: 0.5 });
    expect(listed.withdrawn).toEqual(['sound_play']);

    // Narrowing again replaces the bounds; granting without bounds gives back the catalog's.
    await admin(`command grant --partner ${id} --command toggle --bound period_s=1:2`);
    expect((await list(id)).commands.find((c) => c.name === 'toggle')?.narrowed).toEqual({ period_s: { min: 1, max: 2 } });
    await admin(`command grant --partner ${id} --command toggle`);
    expect((await list(id)).commands.find((c) => c.name === 'toggle')?.narrowed).toEqual({});
    // Narrowing a withdrawn command gives it back, narrowed.
    await admin(`command grant --partner ${id} --command sound_play --bound volume=10:40`);
    const back = await list(id);
    expect(back.withdrawn).toEqual([]);
    expect(back.commands.find((c) => c.name === 'sound_play')?.parameters.find((p) => p.name === 'volume')).toMatchObject({ min: 10, max: 40, default: 10 });
    expect(await admin(`command reset --partner ${id}`)).toEqual({ partner_id: id, restored: ['sound_play'] });
    expect(await admin(`command reset --partner ${id} --command pulse`)).toEqual({ partner_id: id, restored: [] });
  });

  test('bounds wider than the catalog, and other bad input, are refused with a reason', async () => {
    const id = crypto.randomUUID();
    await expect(admin(`command grant --partner ${id} --command pulse --bound period_s=0.05:2`)).rejects.toThrow(
      "'--bound period_s=0.05:2': 'period_s' min must be from 0.1 to 9.999 s, got 0.05 (the catalog's bounds, which staff may only narrow)",
    );
    await expect(admin(`command grant --partner ${id} --command sound_play --bound volume=0:101`)).rejects.toThrow(/'volume' max must be from 0 to 100 %, got 101 \(the catalog's bounds/);
    for (const bad of [
      `command grant --partner nobody --command pulse`,
      `command grant --partner ${id} --command sparkle`,
      `command grant --partner ${id}`,
      `command grant --partner ${id} --all --bound period_s=1:2`,
      `command grant --partner ${id} --command pulse --bound period_s=0:2`,
      `command grant --partner ${id} --command pulse --frobnicate 1`,
      `command revoke --partner ${id}`,
      `command revoke --partner ${id} --command sparkle`,
      `command reset --partner ${id} --command sparkle`,
      `command reset --partner ${id} --all`,
      `command reset`,
      `command drop --partner ${id}`,
    ]) {
      await expect(admin(bad)).rejects.toThrow(AdminError);
    }
    // Nothing refused was stored.
    expect((await list(id)).commands.every((c) => JSON.stringify(c.narrowed) === '{}')).toBe(true);
    expect(((await admin('command catalog')) as { commands: unknown[] }).commands).toHaveLength(CATALOG_NAMES.length);
  });
});
