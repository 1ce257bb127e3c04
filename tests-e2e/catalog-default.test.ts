import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { SimulatedLight, type DeviceMessage } from '@fleet/device-sim';
import { randomDeviceId } from '@fleet/test-kit';
import { api, partnerWithKey } from './support/api';
import { e2eFleet } from './support/fleet-env';

/**
 * The predefined catalog by default: a partner created with `predefined_commands` lists the whole
 * catalog and sends any effect with no staff step; staff withdraw a command (`command revoke`),
 * narrow its bounds (`command grant --bound`) and restore the default (`command reset`), all
 * with the staff CLI against the running fleet.
 */

const ROOT = path.resolve(__dirname, '..');
const SECRET = 'Catalog-E2E-S3cr';
const run = promisify(execFile);

/** `npm run -s admin -- command ...` on the suite's light-command database. */
async function commandAdmin(...argv: string[]): Promise<Record<string, unknown>> {
  const env = { ...process.env, DATABASE_URL: `postgresql://postgres@127.0.0.1:5432/${e2eFleet().databasePrefix}light_command` };
  const { stdout } = await run(process.execPath, [path.join(ROOT, 'scripts', 'admin.js'), 'command', ...argv], { env, cwd: ROOT });
  return JSON.parse(stdout) as Record<string, unknown>;
}

async function commandAdminFails(...argv: string[]): Promise<{ code: number; stderr: string }> {
  try {
    await commandAdmin(...argv);
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
  throw new Error(`admin command ${argv.join(' ')} succeeded unexpectedly`);
}

interface Command {
  name: string;
  channels: string[];
  parameters: Array<{ name: string; min?: number; max?: number; default?: unknown }>;
}

let light: SimulatedLight;
let partner: Awaited<ReturnType<typeof partnerWithKey>>;

beforeAll(async () => {
  const provisioner = await partnerWithKey(['--permissions', 'device_provisioning', '--access-all-devices']);
  const id = randomDeviceId();
  const res = await api('POST', `/v1/devices/${id}`, {
    key: provisioner.key,
    body: { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET, product: 'light' },
  });
  expect(res.status).toBe(201);
  light = new SimulatedLight({ brokerUrl: e2eFleet().mqttUrl, deviceId: id, rootSecret: SECRET });
  await light.start();
  partner = await partnerWithKey(['--permissions', 'predefined_commands', '--access-all-devices', '--device-commands-per-min', '1000']);
}, 60_000);

afterAll(async () => {
  await light?.stop().catch(() => undefined);
});

const catalog = async (): Promise<Command[]> => {
  const res = await api('GET', '/v1/commands', { key: partner.key });
  expect(res.status).toBe(200);
  return res.body.commands as Command[];
};
const effect = (channel: string, body: Record<string, unknown>) => api('POST', `/v1/devices/${light.deviceId}/channels/${channel}/effects`, { key: partner.key, body });

/** Sends an effect expecting 202, and resolves with the payload the light received on cmd/<channel>. */
async function delivered(channel: string, body: Record<string, unknown>): Promise<string> {
  const received = light.next('received', (m: DeviceMessage) => m.sub === `cmd/${channel}`, 8000);
  const res = await effect(channel, body);
  if (res.status !== 202) {
    received.catch(() => undefined);
    throw new Error(`expected 202, got ${res.status} ${JSON.stringify(res.body)}`);
  }
  expect(res.body).toEqual({ channel, command: body.command });
  return (await received).payload.toString('utf8');
}

/** Sends an effect expecting a refusal; the light receives nothing. */
async function refused(channel: string, body: Record<string, unknown>): Promise<Record<string, unknown> & { status: number }> {
  const before = light.received.length;
  const res = await effect(channel, body);
  await new Promise((r) => setTimeout(r, 300));
  expect(light.received.length).toBe(before);
  return { status: res.status, ...res.body };
}

test('a new partner holding predefined_commands lists the whole catalog with its bounds and sends effects, with no staff step', async () => {
  // The partner has all five channels, so it sees exactly what staff see as the catalog.
  const staffView = (await commandAdmin('catalog')).commands as Command[];
  expect(staffView.length).toBeGreaterThan(10);
  expect(await catalog()).toEqual(staffView);
  expect(await delivered('light1', { command: 'pulse', params: { color: 'FF0000', period_s: 0.1 } })).toBe('pulse:FF0000,100');
  expect(await delivered('light2', { command: 'chase', params: { period_s: 9.999, duration_s: 600, interval_s: 10 } })).toBe('chase:FF0000,9999,3@600000/10000');
  expect(await delivered('sound', { command: 'sound_play', params: { volume: 100 } })).toBe('play:chime.mp3,100,1');
  expect(await delivered('contact', { command: 'contact_on' })).toBe('on');
});

test('command revoke withdraws a command: gone from the list, 403 forbidden without required_permission; reset gives it back', async () => {
  expect(await commandAdmin('revoke', '--partner', partner.id, '--command', 'pulse')).toEqual({ partner_id: partner.id, withdrawn: ['pulse'] });
  const names = (await catalog()).map((c) => c.name);
  expect(names).not.toContain('pulse');
  expect(names).toContain('chase');
  const res = await refused('light1', { command: 'pulse' });
  expect(res).toMatchObject({ status: 403, code: 'forbidden' });
  expect(res.required_permission).toBeUndefined();
  expect(((await commandAdmin('list', '--partner', partner.id)).withdrawn as string[])).toEqual(['pulse']);

  expect(await commandAdmin('reset', '--partner', partner.id, '--command', 'pulse')).toEqual({ partner_id: partner.id, restored: ['pulse'] });
  expect((await catalog()).map((c) => c.name)).toContain('pulse');
  expect(await delivered('light1', { command: 'pulse' })).toBe('pulse:0000FF,1000');
});

test('command grant --bound narrows a command: the list shows the narrowed bounds, a value outside them is 400; wider than the catalog is refused', async () => {
  expect(await commandAdmin('grant', '--partner', partner.id, '--command', 'chase', '--bound', 'period_s=0.5:2:1', '--bound', 'width=2:6')).toEqual({
    partner_id: partner.id,
    granted: ['chase'],
    bounds: { period_s: { min: 0.5, max: 2, default: 1 }, width: { min: 2, max: 6 } },
  });
  const chase = (await catalog()).find((c) => c.name === 'chase');
  expect(chase?.parameters.find((p) => p.name === 'period_s')).toMatchObject({ min: 0.5, max: 2, default: 1 });
  expect(chase?.parameters.find((p) => p.name === 'width')).toMatchObject({ min: 2, max: 6, default: 3 });

  for (const params of [{ period_s: 0.4 }, { period_s: 2.001 }, { width: 7 }]) {
    const res = await refused('light1', { command: 'chase', params });
    expect(res).toMatchObject({ status: 400, code: 'validation_error' });
    expect(String(res.error)).toContain(`params.${Object.keys(params)[0]}`);
  }
  expect(await delivered('light1', { command: 'chase', params: { period_s: 2, width: 6 } })).toBe('chase:FF0000,2000,6');
  expect(await delivered('light1', { command: 'chase' })).toBe('chase:FF0000,1000,3');
  // Other commands keep the catalog's bounds.
  expect(await delivered('light1', { command: 'toggle', params: { period_s: 0.1 } })).toBe('toggle:FF0000,0000FF,100,50');

  const wider = await commandAdminFails('grant', '--partner', partner.id, '--command', 'chase', '--bound', 'period_s=0.05:2');
  expect(wider.code).toBe(2);
  expect(wider.stderr).toContain("'period_s' min must be from 0.1 to 9.999 s, got 0.05 (the catalog's bounds, which staff may only narrow)");
  // The refused narrowing changed nothing.
  expect((await catalog()).find((c) => c.name === 'chase')?.parameters.find((p) => p.name === 'period_s')).toMatchObject({ min: 0.5, max: 2 });

  expect(await commandAdmin('reset', '--partner', partner.id)).toEqual({ partner_id: partner.id, restored: ['chase'] });
  expect(await catalog()).toEqual((await commandAdmin('catalog')).commands);
});
