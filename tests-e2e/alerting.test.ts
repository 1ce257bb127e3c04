import { SimulatedLight } from '@fleet/device-sim';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { api, partnerWithKey } from './support/api';
import { ALERT_PERIOD_MS, e2eFleet } from './support/fleet-env';

/**
 * Temperature automation end to end: a simulated light relays its sensor's readings through the
 * broker and the bridge to config-alerting, which evaluates them every ALERT_PERIOD_MS against
 * the partner's profile and writes the chosen signal's entry to light1 through light-command.
 */

const SECRET = 'Alerting-E2E-Sc!';
const SENSOR = 'fridge.1';
const color = (r: number, g: number, b: number) => ({ r, g, b });
const entries = {
  CLEAR: { light: { type: 'Solid', color: color(0, 128, 0) } },
  ADVISORY: { light: { type: 'Solid', color: color(255, 191, 0) } },
  WARNING: { light: { type: 'Pulse', color: color(255, 0, 0), period_s: 0.5 } },
  NO_DATA: { light: { type: 'Solid', color: color(0, 0, 64) } },
};
/** What light1 receives for each entry above (the wire grammar of the device protocol). */
const WIRE = { CLEAR: 'solid:008000', WARNING: 'pulse:FF0000,500', NO_DATA: 'solid:000040' };
/** The default signal's CLEAR entry. */
const DEFAULT_CLEAR = 'solid:00FF00';

let partner: Awaited<ReturnType<typeof partnerWithKey>>;
const lights: SimulatedLight[] = [];

const call = (method: string, path: string, body?: unknown) => api(method, path, { key: partner.key, body });

async function expectStatus(res: Promise<{ status: number; body: Record<string, unknown> }>, status: number): Promise<Record<string, unknown>> {
  const answer = await res;
  if (answer.status !== status) throw new Error(`expected ${status}, got ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

async function connectedLight(): Promise<SimulatedLight> {
  const id = randomDeviceId();
  await expectStatus(call('POST', `/v1/devices/${id}`, { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET, product: 'light' }), 201);
  // One reading a second, 4 °C give or take, a breach above 8 °C.
  const light = new SimulatedLight({ brokerUrl: e2eFleet().mqttUrl, deviceId: id, rootSecret: SECRET, sensors: [{ tdlId: SENSOR, periodSec: 1 }] });
  lights.push(light);
  await light.start();
  return light;
}

const levelOf = async (light: SimulatedLight) => (await expectStatus(call('GET', `/v1/devices/${light.deviceId}/config`), 200)).alert_level;

/** Waits for light1 to show `payload`; a timeout says what light1 and the level were at that moment. */
async function light1Becomes(light: SimulatedLight, payload: string, what: string): Promise<void> {
  try {
    await waitFor(() => light.channels.light1 === payload, { timeoutMs: 20 * ALERT_PERIOD_MS, what: `light1 showing ${what} (${payload})` });
  } catch (err) {
    const level = await levelOf(light).catch((e: unknown) => `unreadable (${(e as Error).message})`);
    throw new Error(`${(err as Error).message}; at the timeout it shows '${light.channels.light1}', the level is ${String(level)}, the light is ${light.connected ? 'connected' : 'not connected'}`);
  }
}

beforeAll(async () => {
  partner = await partnerWithKey(['--permissions', 'device_provisioning,config_read,config_write,profile_manage,signal_manage,automation_control,raw_commands', '--access-all-devices']);
}, 60_000);

afterAll(async () => {
  await Promise.all(lights.map((l) => l.stop().catch(() => undefined)));
});

it('moves the light with its sensor, writes exactly the chosen entry to light1 and nothing else, and stops while automation is off', async () => {
  const light = await connectedLight();
  const device = `/v1/devices/${light.deviceId}`;
  const { id: profileId } = await expectStatus(
    call('POST', '/v1/profiles', {
      name: `Fridge ${light.deviceId}`,
      rules: [
        { all: [{ metric: 'newest_age_secs', op: '>', value: 8 }], level: 'STALE_DATA' },
        { all: [{ metric: 'latest_temp_c', op: '>', value: 8 }], level: 'WARNING' },
      ],
      default: 'CLEAR',
    }),
    201,
  );
  const { id: signalId } = await expectStatus(call('POST', '/v1/alert-signals', { name: `Kitchen ${light.deviceId}`, entries }), 201);
  await expectStatus(call('POST', `${device}/sensors`, { tdl_id: SENSOR, profile_id: profileId }), 201);
  await expectStatus(call('PUT', `${device}/alert-signal`, { alert_signal_id: signalId }), 200);

  await light1Becomes(light, WIRE.CLEAR, 'the CLEAR entry');
  expect(await expectStatus(call('GET', `${device}/config`), 200)).toMatchObject({
    device_id: light.deviceId,
    automation_enabled: true,
    alert_signal_id: signalId,
    alert_level: 'CLEAR',
    sensors: [{ tdl_id: SENSOR, profile: { id: profileId }, level: 'CLEAR' }],
  });

  // The fridge warms up: WARNING.
  light.setSensor(SENSOR, { temp_c: 9.5, breach: true });
  await light1Becomes(light, WIRE.WARNING, 'the WARNING entry');

  // Automation off: the level still follows the sensor, light1 keeps the partner's own command.
  await expectStatus(call('PUT', `${device}/automation`, { enabled: false }), 200);
  await expectStatus(call('POST', `${device}/commands`, { channel: 'light1', payload: 'solid:111111' }), 202);
  await light1Becomes(light, 'solid:111111', "the partner's own command");
  light.setSensor(SENSOR, { temp_c: 3, breach: false });
  await waitFor(async () => (await levelOf(light)) === 'CLEAR', { timeoutMs: 20 * ALERT_PERIOD_MS, what: 'the level back to CLEAR' });
  // Absence can only be shown over time: two more cycles, each of which would have written.
  await new Promise((r) => setTimeout(r, 2 * ALERT_PERIOD_MS));
  expect(light.channels.light1).toBe('solid:111111');

  // On again: the pending write goes out and overwrites the partner's command.
  await expectStatus(call('PUT', `${device}/automation`, { enabled: true }), 200);
  await light1Becomes(light, WIRE.CLEAR, 'the CLEAR entry once automation is back');

  // A changed signal reaches the light at the next cycle; so does the default signal.
  await expectStatus(call('PUT', `/v1/alert-signals/${signalId}`, { entries: { ...entries, CLEAR: { light: { type: 'Solid', color: color(0, 0, 255) } } } }), 200);
  await light1Becomes(light, 'solid:0000FF', 'the changed CLEAR entry');
  await expectStatus(call('PUT', `${device}/alert-signal`, { alert_signal_id: null }), 200);
  await light1Becomes(light, DEFAULT_CLEAR, "the default signal's CLEAR entry");
  await expectStatus(call('PUT', `${device}/alert-signal`, { alert_signal_id: signalId }), 200);

  // The sensor falls silent: STALE_DATA shows the NO_DATA entry.
  light.setSensorSilent(SENSOR, true);
  await light1Becomes(light, WIRE.NO_DATA, 'the NO_DATA entry');
  expect(await levelOf(light)).toBe('STALE_DATA');

  // Only light1 was ever written, and only with the entries' payloads.
  const commands = light.received.filter((m) => m.sub.startsWith('cmd/'));
  expect(new Set(commands.map((m) => m.sub))).toEqual(new Set(['cmd/light1']));
  const written = new Set(commands.map((m) => m.payload.toString('utf8')));
  for (const payload of written) expect([WIRE.CLEAR, WIRE.WARNING, WIRE.NO_DATA, 'solid:0000FF', DEFAULT_CLEAR, 'solid:111111']).toContain(payload);
}, 120_000);

it('deleting a signal in use returns its lights to the default signal', async () => {
  const light = await connectedLight();
  const device = `/v1/devices/${light.deviceId}`;
  const { id: signalId } = await expectStatus(call('POST', '/v1/alert-signals', { name: `Doomed ${light.deviceId}`, entries }), 201);
  await expectStatus(call('POST', `${device}/sensors`, { tdl_id: SENSOR }), 201);
  await expectStatus(call('PUT', `${device}/alert-signal`, { alert_signal_id: signalId }), 200);
  await light1Becomes(light, WIRE.CLEAR, 'the CLEAR entry');
  await expectStatus(call('DELETE', `/v1/alert-signals/${signalId}`), 204);
  await light1Becomes(light, DEFAULT_CLEAR, "the default signal's CLEAR entry");
  expect((await expectStatus(call('GET', `${device}/config`), 200)).alert_signal_id).toBeNull();
}, 60_000);

it("the partner guide's worked example is accepted as written", async () => {
  const guide = await (await fetch(`${e2eFleet().gatewayUrl}/docs`)).text();
  const section = guide.slice(guide.indexOf('<section id="alerting">'), guide.indexOf('</section>', guide.indexOf('<section id="alerting">')));
  const unescape = (html: string) => html.replace(/&gt;/g, '>').replace(/&lt;/g, '<').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');
  const bodies = [...section.matchAll(/-X POST "\$BASE_URL(\/v1\/(?:profiles|alert-signals))"[\s\S]*?-d '([\s\S]*?)'/g)].map((m) => ({ path: m[1]!, body: JSON.parse(unescape(m[2]!)) as Record<string, unknown> }));
  expect(bodies.map((b) => b.path)).toEqual(['/v1/profiles', '/v1/alert-signals']);
  for (const { path, body } of bodies) {
    await expectStatus(call('POST', path, { ...body, name: `${String(body.name)} ${randomDeviceId()}` }), 201);
  }
});

it('answers 404 for a profile or signal id that names no row of the partner, whatever it is (an integer or not)', async () => {
  const light = await connectedLight();
  for (const id of ['0', '-4', '2147483648', '99999999999999', 'abc', '1.5']) {
    expect((await call('PUT', `/v1/profiles/${id}`, { name: 'x' })).status).toBe(404);
    expect((await call('DELETE', `/v1/alert-signals/${id}`)).status).toBe(404);
  }
  expect((await call('PUT', `/v1/devices/${light.deviceId}/alert-signal`, { alert_signal_id: 0 })).body.code).toBe('not_found');
  expect((await call('POST', `/v1/devices/${light.deviceId}/sensors`, { tdl_id: SENSOR, profile_id: -1 })).body.code).toBe('not_found');
  // A sensor id in the path that cannot be one is no sensor attached: 404, as one not attached is.
  for (const tdl of ['x'.repeat(65), 'has%20space', 'not-attached']) {
    expect((await call('PUT', `/v1/devices/${light.deviceId}/sensors/${tdl}`, { profile_id: null })).body.code).toBe('not_found');
    expect((await call('DELETE', `/v1/devices/${light.deviceId}/sensors/${tdl}`)).body.code).toBe('not_found');
  }
}, 60_000);
