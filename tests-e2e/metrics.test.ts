import { SimClock, SimulatedLight, SimulatedMeter } from '@fleet/device-sim';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { api, partnerWithKey } from './support/api';
import { e2eFleet } from './support/fleet-env';

/**
 * Every service's Prometheus metrics on its health port, on the shared fleet: the process
 * families everywhere, each service's own families, and counters that move when a partner's
 * requests, a light command and meter records flow.
 */

const SECRET = 'Metrics-E2E-Sec!';
const SERVICES = ['gateway', 'device-registry', 'light-command', 'config-alerting', 'meter', 'system-files', 'mqtt-bridge', 'events'];
let partner: Awaited<ReturnType<typeof partnerWithKey>>;
const devices: Array<{ stop(): Promise<void> }> = [];

beforeAll(async () => {
  partner = await partnerWithKey(['--permissions', 'device_provisioning,raw_commands,energy_read', '--access-all-devices', '--device-commands-per-min', '1000']);
}, 60_000);

afterAll(async () => {
  await Promise.all(devices.map((d) => d.stop().catch(() => undefined)));
});

async function scrape(service: string): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${e2eFleet().healthPorts[service]}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

/** The sum of a family's series whose labels include all of `labels` (0 when there are none). */
function sum(text: string, family: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split('\n')) {
    // Label values may hold braces (route templates): the label set runs to the last `} `.
    const m = /^([a-z_]+)\{(.*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== family) continue;
    const have = Object.fromEntries([...(m[2] as string).matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) total += Number(m[3]);
  }
  return total;
}

async function provision(product: 'light' | 'meter'): Promise<string> {
  const id = randomDeviceId();
  const res = await api('POST', `/v1/devices/${id}`, { key: partner.key, body: { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET, product } });
  expect(res.status).toBe(201);
  return id;
}

it('answers Prometheus text on every health port: process and event-loop metrics, labelled with the service', async () => {
  for (const service of SERVICES) {
    const text = await scrape(service);
    expect({ service, cpu: new RegExp(`^process_cpu_user_seconds_total\\{[^}]*service="${service}"`, 'm').test(text) }).toEqual({ service, cpu: true });
    expect({ service, loop: /^nodejs_eventloop_lag_p99_seconds\{/m.test(text) }).toEqual({ service, loop: true });
  }
});

it('moves the gateway, bus, bridge, meter, registry and consumer counters as requests, a command and meter records flow', async () => {
  const before = {
    gateway: sum(await scrape('gateway'), 'fleet_http_requests_total', { route: '/v1/devices/{device_id}/commands', method: 'POST', status: '202' }),
    command: sum(await scrape('light-command'), 'fleet_bus_handled_total', { outcome: 'ok' }),
    out: sum(await scrape('mqtt-bridge'), 'fleet_bridge_messages_total', { direction: 'out', product: 'light', outcome: 'sent' }),
    captured: sum(await scrape('mqtt-bridge'), 'fleet_bridge_messages_total', { direction: 'in', product: 'meter', outcome: 'stored' }),
    stored: sum(await scrape('meter'), 'fleet_meter_records_total', { outcome: 'stored' }),
  };

  const light = new SimulatedLight({ brokerUrl: e2eFleet().mqttUrl, deviceId: await provision('light'), rootSecret: SECRET });
  devices.push(light);
  await light.start();
  const res = await api('POST', `/v1/devices/${light.deviceId}/commands`, { key: partner.key, body: { channel: 'light1', payload: 'pulse:ff0000,1200' } });
  expect(res.status).toBe(202);

  const meter = new SimulatedMeter({ brokerUrl: e2eFleet().mqttUrl, deviceId: await provision('meter'), rootSecret: SECRET, clock: new SimClock({ speed: 7200, origin: Date.now() }), intervalSec: 900 });
  devices.push(meter);
  await meter.start();

  await waitFor(async () => sum(await scrape('meter'), 'fleet_meter_records_total', { outcome: 'stored' }) >= before.stored + 2, { timeoutMs: 20_000, what: 'meter records counted as stored' });
  expect(sum(await scrape('gateway'), 'fleet_http_requests_total', { route: '/v1/devices/{device_id}/commands', method: 'POST', status: '202' })).toBe(before.gateway + 1);
  expect(sum(await scrape('light-command'), 'fleet_bus_handled_total', { outcome: 'ok' })).toBeGreaterThan(before.command);
  expect(sum(await scrape('mqtt-bridge'), 'fleet_bridge_messages_total', { direction: 'out', product: 'light', outcome: 'sent' })).toBeGreaterThan(before.out);
  const bridge = await scrape('mqtt-bridge');
  expect(sum(bridge, 'fleet_bridge_messages_total', { direction: 'in', product: 'meter', outcome: 'stored' })).toBeGreaterThan(before.captured);
  expect(sum(bridge, 'fleet_bridge_capture_duration_seconds_count', { product: 'meter' })).toBeGreaterThan(0);

  const registry = await scrape('device-registry');
  expect(sum(registry, 'fleet_registry_devices', { product: 'light' })).toBeGreaterThanOrEqual(1);
  expect(sum(registry, 'fleet_registry_devices', { product: 'meter' })).toBeGreaterThanOrEqual(1);
  // The meter's DEVICE_IN consumer reports its backlog (whatever it is right now).
  expect(await scrape('meter')).toMatch(/^fleet_jetstream_consumer_messages\{[^}]*stream="DEVICE_IN"[^}]*state="pending"/m);
  // Labels stay bounded: no device id anywhere.
  for (const service of SERVICES) expect((await scrape(service)).includes(light.deviceId)).toBe(false);
});
