import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { SimulatedLight, type DeviceMessage } from '@fleet/device-sim';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { api, partnerWithKey } from './support/api';
import { e2eFleet } from './support/fleet-env';

/**
 * Light commands end to end: partner → gateway → light-command → mqtt-bridge → Mosquitto →
 * a simulated light, and the light's state report back through DEVICE_IN to GET .../state.
 */

const ROOT = path.resolve(__dirname, '..');
const SECRET = 'Light-E2E-Secr3t';

/** `npm run -s admin -- command ...` on the suite's light-command database. */
async function commandAdmin(...argv: string[]): Promise<Record<string, unknown>> {
  const env = { ...process.env, DATABASE_URL: `postgresql://postgres@127.0.0.1:5432/${e2eFleet().databasePrefix}light_command` };
  const { stdout } = await promisify(execFile)(process.execPath, [path.join(ROOT, 'scripts', 'admin.js'), 'command', ...argv], { env, cwd: ROOT });
  return JSON.parse(stdout) as Record<string, unknown>;
}

let operator: Awaited<ReturnType<typeof partnerWithKey>>;
const lights: SimulatedLight[] = [];

async function connectedLight(): Promise<SimulatedLight> {
  const id = randomDeviceId();
  const res = await api('POST', `/v1/devices/${id}`, {
    key: operator.key,
    body: { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET, product: 'light' },
  });
  expect(res.status).toBe(201);
  const light = new SimulatedLight({ brokerUrl: e2eFleet().mqttUrl, deviceId: id, rootSecret: SECRET });
  lights.push(light);
  await light.start();
  return light;
}

/** Sends, and resolves with what the light received on cmd/<channel>. */
async function sendAndReceive(light: SimulatedLight, channel: string, send: () => Promise<{ status: number; body: Record<string, unknown> }>) {
  const received = light.next('received', (m: DeviceMessage) => m.sub === `cmd/${channel}`, 8000);
  const res = await send();
  if (res.status !== 202) {
    received.catch(() => undefined);
    throw new Error(`expected 202, got ${res.status} ${JSON.stringify(res.body)}`);
  }
  const m = await received;
  return { res, payload: m.payload.toString('utf8'), qos: m.qos, retain: m.retain };
}

beforeAll(async () => {
  operator = await partnerWithKey([
    '--permissions',
    'device_provisioning,raw_commands,predefined_commands,state_read,relaxed_caps',
    '--access-all-devices',
    '--device-commands-per-min',
    '1000',
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all(lights.map((l) => l.stop().catch(() => undefined)));
});

describe('raw commands reach the light byte for byte', () => {
  test.each([
    ['light1', 'pulse:ff0000,1200'],
    ['light2', 'solid:00FF00@5000/60000'],
    ['light3', 'togglesolid:5000,FF0000,0000FF,400,25,00FF00,0'],
    ['sound', 'play:chime.mp3,50,2'],
    ['contact', 'pulse:500'],
    ['light1', 'pulse:FF0000,20'],
  ])('%s %s', async (channel, payload) => {
    const light = lights[0] ?? (await connectedLight());
    const { res, payload: got, qos } = await sendAndReceive(light, channel, () =>
      api('POST', `/v1/devices/${light.deviceId}/commands`, { key: operator.key, body: { channel, payload } }),
    );
    expect(res.body).toEqual({ channel, payload, command: 'raw' });
    expect(got).toBe(payload);
    expect(qos).toBe(1);
  });
});

describe('predefined effects reach the light as their wire payload', () => {
  test.each([
    ['light1', { command: 'pulse', params: { color: 'FF0000', period_s: 1.2 } }, 'pulse:FF0000,1200'],
    ['light2', { command: 'chase', params: { color: '00FF00', period_s: 0.5, width: 4, duration_s: 10, interval_s: 120 } }, 'chase:00FF00,500,4@10000/120000'],
    ['light3', { command: 'solid', params: { color: '0000ff', duration_s: 2, interval_s: 0 } }, 'solid:0000FF@2000/0'],
    ['light1', { command: 'toggle_then_solid', params: { toggle_time_s: 4, duty_ratio: 0.25, repeat_s: 30 } }, 'togglesolid:4000,FF0000,0000FF,1000,25,00FF00,30'],
    ['sound', { command: 'sound_play', params: { volume: 70 } }, 'play:chime.mp3,70,1'],
    ['contact', { command: 'contact_pulse', params: { pulse_s: 0.25 } }, 'pulse:250'],
    ['light1', { command: 'off' }, 'off'],
  ])('%s %j', async (channel, body, wire) => {
    const light = lights[0] ?? (await connectedLight());
    const { res, payload } = await sendAndReceive(light, channel, () =>
      api('POST', `/v1/devices/${light.deviceId}/channels/${channel}/effects`, { key: operator.key, body }),
    );
    expect(payload).toBe(wire);
    expect(res.body).toEqual({ channel, command: body.command, payload: wire });
  });

  test('without raw_commands the answer carries no payload; out of narrowed bounds is 400 naming the field, a withdrawn command 403; nothing sent', async () => {
    const light = lights[0] ?? (await connectedLight());
    const p = await partnerWithKey(['--permissions', 'predefined_commands', '--access-all-devices']);
    await commandAdmin('grant', '--partner', p.id, '--command', 'pulse', '--bound', 'period_s=0.5:2');
    const { res, payload } = await sendAndReceive(light, 'light1', () =>
      api('POST', `/v1/devices/${light.deviceId}/channels/light1/effects`, { key: p.key, body: { command: 'pulse', params: { period_s: 2 } } }),
    );
    expect(res.body).toEqual({ channel: 'light1', command: 'pulse' });
    expect(payload).toBe('pulse:0000FF,2000');

    const before = light.received.length;
    const tooFast = await api('POST', `/v1/devices/${light.deviceId}/channels/light1/effects`, { key: p.key, body: { command: 'pulse', params: { period_s: 0.4 } } });
    expect(tooFast.status).toBe(400);
    expect(tooFast.body).toMatchObject({ code: 'validation_error' });
    expect(String(tooFast.body.error)).toContain('params.period_s');
    await commandAdmin('revoke', '--partner', p.id, '--command', 'chase');
    const withdrawn = await api('POST', `/v1/devices/${light.deviceId}/channels/light1/effects`, { key: p.key, body: { command: 'chase' } });
    expect(withdrawn.status).toBe(403);
    expect(withdrawn.body).toMatchObject({ code: 'forbidden' });
    expect(withdrawn.body.required_permission).toBeUndefined();
    await new Promise((r) => setTimeout(r, 300));
    expect(light.received.length).toBe(before);
  });
});

describe('GET /v1/devices/{id}/state', () => {
  test('shows what the light reported, decoded, for permitted channels; payload only with raw_commands', async () => {
    const light = await connectedLight();
    await sendAndReceive(light, 'light1', () =>
      api('POST', `/v1/devices/${light.deviceId}/commands`, { key: operator.key, body: { channel: 'light1', payload: 'pulse:FF0000,1200' } }),
    );
    await sendAndReceive(light, 'light2', () =>
      api('POST', `/v1/devices/${light.deviceId}/commands`, { key: operator.key, body: { channel: 'light2', payload: 'solid:00FF00@5000/60000' } }),
    );
    const state = await waitFor(
      async () => {
        const res = await api('GET', `/v1/devices/${light.deviceId}/state`, { key: operator.key });
        const s = res.body.state as Record<string, { label: string; payload: string; updated_at: string }> | undefined;
        return s?.light1 && s.light2 ? s : undefined;
      },
      { timeoutMs: 10_000, what: 'the light1 and light2 state reports' },
    );
    expect(state.light1).toMatchObject({ label: 'Pulse #FF0000 every 1.2 s', payload: 'pulse:FF0000,1200' });
    expect(state.light2).toMatchObject({ label: 'Overlay: Solid #00FF00 for 5 s every 60 s', payload: 'solid:00FF00@5000/60000' });
    expect(Date.parse(state.light1?.updated_at ?? '')).toBeGreaterThan(Date.now() - 60_000);

    const reader = await partnerWithKey(['--permissions', 'state_read', '--access-all-devices', '--channels', 'light2']);
    const limited = await api('GET', `/v1/devices/${light.deviceId}/state`, { key: reader.key });
    expect(limited.status).toBe(200);
    expect(limited.body).toEqual({ device_id: light.deviceId, state: { light2: { label: 'Overlay: Solid #00FF00 for 5 s every 60 s', updated_at: state.light2?.updated_at } } });

    // idle reports back as Off
    await sendAndReceive(light, 'light1', () => api('POST', `/v1/devices/${light.deviceId}/channels/light1/effects`, { key: operator.key, body: { command: 'off' } }));
    await waitFor(
      async () => {
        const res = await api('GET', `/v1/devices/${light.deviceId}/state`, { key: operator.key });
        return (res.body.state as Record<string, { label: string }>).light1?.label === 'Off';
      },
      { timeoutMs: 10_000, what: 'light1 Off' },
    );
  });

  test('needs state_read (403 naming it); an unknown device is 404', async () => {
    const light = lights[0] ?? (await connectedLight());
    const p = await partnerWithKey(['--permissions', 'raw_commands', '--access-all-devices']);
    const res = await api('GET', `/v1/devices/${light.deviceId}/state`, { key: p.key });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ code: 'forbidden', required_permission: 'state_read' });
    expect((await api('GET', `/v1/devices/${randomDeviceId()}/state`, { key: operator.key })).status).toBe(404);
  });
});

describe('statuses, codes and permissions of the command routes', () => {
  test('raw_commands and predefined_commands are required, named in the 403', async () => {
    const light = lights[0] ?? (await connectedLight());
    const p = await partnerWithKey(['--permissions', 'state_read', '--access-all-devices']);
    const raw = await api('POST', `/v1/devices/${light.deviceId}/commands`, { key: p.key, body: { channel: 'light1', payload: 'off' } });
    expect(raw.status).toBe(403);
    expect(raw.body).toMatchObject({ code: 'forbidden', required_permission: 'raw_commands' });
    const effect = await api('POST', `/v1/devices/${light.deviceId}/channels/light1/effects`, { key: p.key, body: { command: 'off' } });
    expect(effect.body).toMatchObject({ code: 'forbidden', required_permission: 'predefined_commands' });
    const catalog = await api('GET', '/v1/commands', { key: p.key });
    expect(catalog.body).toMatchObject({ code: 'forbidden', required_permission: 'predefined_commands' });
  });

  test('channel access: 403 that no permission lifts', async () => {
    const light = lights[0] ?? (await connectedLight());
    const p = await partnerWithKey(['--permissions', 'raw_commands,predefined_commands,relaxed_caps', '--access-all-devices', '--channels', 'light1']);
    for (const res of [
      await api('POST', `/v1/devices/${light.deviceId}/commands`, { key: p.key, body: { channel: 'sound', payload: 'stop' } }),
      await api('POST', `/v1/devices/${light.deviceId}/channels/contact/effects`, { key: p.key, body: { command: 'contact_on' } }),
      // before the rest of the request: a body that is wrong otherwise, a device that is not there
      await api('POST', `/v1/devices/${light.deviceId}/commands`, { key: p.key, body: { channel: 'sound', payload: '', extra: 1 } }),
      await api('POST', '/v1/devices/FFFFFFFFFFFF/commands', { key: p.key, body: { channel: 'contact', payload: 'on' } }),
      await api('POST', '/v1/devices/FFFFFFFFFFFF/channels/sound/effects', { key: p.key, body: { command: 'no_such_command' } }),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('forbidden');
      expect(res.body.required_permission).toBeUndefined();
    }
    const catalog = await api('GET', '/v1/commands', { key: p.key });
    const commands = catalog.body.commands as Array<{ name: string; channels: string[] }>;
    expect(commands.find((c) => c.name === 'pulse')?.channels).toEqual(['light1']);
    expect(commands.find((c) => c.name === 'sound_play')?.channels).toEqual([]);
  });

  test('grammar is 400 always; caps are 400 without relaxed_caps', async () => {
    const light = lights[0] ?? (await connectedLight());
    const strict = await partnerWithKey(['--permissions', 'raw_commands', '--access-all-devices']);
    for (const [key, channel, payload, status] of [
      [strict.key, 'light1', 'pulse:FF0000,99', 400],
      [strict.key, 'light1', 'blink', 400],
      [strict.key, 'light4', 'off', 400],
      [operator.key, 'light1', 'pulse:FF0000,19', 400],
      [strict.key, 'contact', 'pulse:10001', 400],
    ] as const) {
      const res = await api('POST', `/v1/devices/${light.deviceId}/commands`, { key, body: { channel, payload } });
      expect([channel, payload, res.status, res.body.code]).toEqual([channel, payload, status, 'validation_error']);
    }
    const { payload } = await sendAndReceive(light, 'contact', () =>
      api('POST', `/v1/devices/${light.deviceId}/commands`, { key: operator.key, body: { channel: 'contact', payload: 'pulse:10001' } }),
    );
    expect(payload).toBe('pulse:10001');
  });

  test('idempotency: a replay answers the first 202 and sends nothing again', async () => {
    const light = await connectedLight();
    const key = `cmd-${Date.now()}`;
    const send = () =>
      api('POST', `/v1/devices/${light.deviceId}/commands`, { key: operator.key, body: { channel: 'light3', payload: 'solid:123456' }, headers: { 'Idempotency-Key': key } });
    const { res } = await sendAndReceive(light, 'light3', send);
    const replay = await send();
    expect(replay.status).toBe(202);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(res.body);
    await new Promise((r) => setTimeout(r, 300));
    expect(light.received.filter((m) => m.sub === 'cmd/light3')).toHaveLength(1);
  });

  test('the per-device command limit is 429 with Retry-After', async () => {
    const light = await connectedLight();
    const p = await partnerWithKey(['--permissions', 'raw_commands', '--access-all-devices', '--device-commands-per-min', '2']);
    for (let i = 0; i < 2; i++) {
      const res = await api('POST', `/v1/devices/${light.deviceId}/commands`, { key: p.key, body: { channel: 'light1', payload: 'off' } });
      expect(res.status).toBe(202);
    }
    const limited = await api('POST', `/v1/devices/${light.deviceId}/commands`, { key: p.key, body: { channel: 'light1', payload: 'off' } });
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  test('the global per-device ceiling is shared across partners: 429 with Retry-After', async () => {
    const light = await connectedLight();
    const a = await partnerWithKey(['--permissions', 'raw_commands', '--access-all-devices', '--device-commands-per-min', '1000']);
    const b = await partnerWithKey(['--permissions', 'raw_commands', '--access-all-devices', '--device-commands-per-min', '1000']);
    const send = (key: string) => api('POST', `/v1/devices/${light.deviceId}/commands`, { key, body: { channel: 'light1', payload: 'off' } });
    // The suite's fleet runs with the default ceiling of 120 commands per device per minute.
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push(...(await Promise.all(Array.from({ length: 10 }, (_, j) => send(j % 2 === 0 ? a.key : b.key)))).map((r) => r.status));
    expect(statuses.filter((s) => s === 202)).toHaveLength(120);
    const over = await send(b.key);
    expect(over.status).toBe(429);
    expect(over.body.code).toBe('rate_limited');
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
    // Another light is not affected.
    const other = await connectedLight();
    expect((await api('POST', `/v1/devices/${other.deviceId}/commands`, { key: b.key, body: { channel: 'light1', payload: 'off' } })).status).toBe(202);
  });
});
