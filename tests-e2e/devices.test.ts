import { connect as mqttConnect, type MqttClient } from 'mqtt';
import { SimulatedLight, SimulatedMeter, deriveBrokerPassword } from '@fleet/device-sim';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { admin, api, partnerWithKey } from './support/api';
import { e2eFleet } from './support/fleet-env';

// Provisioning, connectivity and removal through the gateway, the registry, the bridge and
// the run's own Mosquitto with dynamic security, with simulated devices.

const ROOT_SECRET = 'Sim-Root-Secret!';
let key: string;
const devices: SimulatedLight[] = [];

beforeAll(async () => {
  key = (await partnerWithKey(['--permissions', 'device_provisioning,device_removal,health_read', '--access-all-devices'])).key;
});

afterAll(async () => {
  await Promise.all(devices.map((d) => d.stop().catch(() => undefined)));
});

function light(deviceId: string, credentials: { rootSecret: string } | { password: string }): SimulatedLight {
  const device = new SimulatedLight({ brokerUrl: e2eFleet().mqttUrl, deviceId, ...credentials });
  device.on('error', () => undefined);
  devices.push(device);
  return device;
}

async function provision(deviceId: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return api('POST', `/v1/devices/${deviceId}`, { key, body: { credential_format: 'derived-v1', ...body }, headers });
}

async function status(deviceId: string): Promise<string | undefined> {
  const res = await api('GET', `/v1/devices/${deviceId}`, { key });
  return res.status === 200 ? (res.body.status as string) : undefined;
}

function watcher(): Promise<MqttClient> {
  const { mqttUrl, mqttAdmin } = e2eFleet();
  const client = mqttConnect(mqttUrl, { username: mqttAdmin.username, password: mqttAdmin.password, clientId: `watch-${randomDeviceId()}` });
  return new Promise((resolve, reject) => {
    client.once('connect', () => resolve(client));
    client.once('error', reject);
  });
}

describe('provisioning with each credential source', () => {
  it('generate: returns the root secret once; the device connects with the derived password and shows connected', async () => {
    const id = randomDeviceId();
    const res = await provision(id, { name: 'Lobby light' });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/v1/devices/${id}`);
    expect(res.body).toMatchObject({ device_id: id, credential_format: 'derived-v1', product: 'light', name: 'Lobby light' });
    const password = res.body.password as string;
    expect(password).toMatch(/^[\x21-\x7e]{16}$/);

    expect(await status(id)).toBe('disconnected');
    const device = light(id, { rootSecret: password });
    await device.start();
    await waitFor(async () => (await status(id)) === 'connected', { timeoutMs: 8000, what: 'connected' });
    const shown = await api('GET', `/v1/devices/${id}`, { key });
    expect(shown.body).toMatchObject({ device_id: id, product: 'light', name: 'Lobby light', automation_enabled: true });
    expect(Date.parse(shown.body.last_seen_at as string)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('root_secret: nothing secret comes back; the device derives the same password', async () => {
    const id = randomDeviceId();
    const res = await provision(id, { credential_source: 'root_secret', root_secret: ROOT_SECRET, product: 'meter' });
    expect(res.status).toBe(201);
    expect(res.body.password).toBeUndefined();
    expect(JSON.stringify(res.body)).not.toContain(ROOT_SECRET);
    const device = new SimulatedMeter({ brokerUrl: e2eFleet().mqttUrl, deviceId: id, rootSecret: ROOT_SECRET });
    device.on('error', () => undefined);
    // A meter's password is derived with its own label: the light label must not work.
    expect(deriveBrokerPassword(ROOT_SECRET, id, 'meter')).not.toBe(deriveBrokerPassword(ROOT_SECRET, id, 'light'));
    await expect(light(id, { password: deriveBrokerPassword(ROOT_SECRET, id, 'light') }).start()).rejects.toThrow();
    await device.start();
    await waitFor(async () => (await status(id)) === 'connected', { timeoutMs: 8000, what: 'meter connected' });
    await device.stop();
  });

  it('mqtt_password: used verbatim', async () => {
    const id = randomDeviceId();
    const password = 'a'.repeat(16) + '0123456789abcdef';
    const res = await provision(id, { credential_source: 'mqtt_password', mqtt_password: password });
    expect(res.status).toBe(201);
    await light(id, { password }).start();
    await waitFor(async () => (await status(id)) === 'connected', { timeoutMs: 8000, what: 'connected' });
  });

  it('replays a generate with the same Idempotency-Key, returning the same password again', async () => {
    const id = randomDeviceId();
    const headers = { 'Idempotency-Key': `prov-${id}` };
    const first = await provision(id, {}, headers);
    const replay = await provision(id, {}, headers);
    expect([first.status, replay.status]).toEqual([201, 201]);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body.password).toBe(first.body.password);
    const again = await provision(id, {});
    expect([again.status, again.body.code]).toEqual([409, 'conflict']);
  });

  it('refuses bodies that are not JSON, and credential fields that do not match the source', async () => {
    const id = randomDeviceId();
    const text = await api('POST', `/v1/devices/${id}`, { key, body: 'credential_format=derived-v1', headers: { 'Content-Type': 'text/plain' } });
    expect([text.status, text.body.code]).toEqual([415, 'unsupported_media_type']);
    const mixed = await provision(id, { credential_source: 'generate', root_secret: ROOT_SECRET });
    expect([mixed.status, mixed.body.code]).toEqual([400, 'validation_error']);
    expect((await api('GET', `/v1/devices/${id}`, { key })).status).toBe(404);
  });
});

describe('the broker holds each device to its credential and subtree', () => {
  it('refuses a wrong password', async () => {
    const id = randomDeviceId();
    expect((await provision(id, { credential_source: 'root_secret', root_secret: ROOT_SECRET })).status).toBe(201);
    await expect(light(id, { rootSecret: 'Wrong-Root-Secr!' }).start()).rejects.toThrow();
  });

  it('drops a publish outside the device subtree while its own topics get through', async () => {
    const [id, other] = [randomDeviceId(), randomDeviceId()];
    expect((await provision(id, { credential_source: 'root_secret', root_secret: ROOT_SECRET })).status).toBe(201);
    const watch = await watcher();
    const seen: string[] = [];
    watch.on('message', (topic) => seen.push(topic));
    await watch.subscribeAsync([`light/${other}/#`, `light/${id}/tele/#`]);
    const device = mqttConnect(e2eFleet().mqttUrl, { clientId: id, username: id, password: deriveBrokerPassword(ROOT_SECRET, id, 'light') });
    device.on('error', () => undefined);
    await new Promise<void>((resolve) => device.once('connect', () => resolve()));
    await device.publishAsync(`light/${other}/cmd/light1`, 'solid:FF0000', { qos: 1 }).catch(() => undefined);
    await device.publishAsync(`light/${id}/tele/heartbeat`, '{"uptime_s":1,"rssi_dbm":-50,"heap_free":1000}', { qos: 1 });
    await waitFor(() => seen.includes(`light/${id}/tele/heartbeat`), { what: 'own publish' });
    await new Promise((r) => setTimeout(r, 300));
    expect(seen).not.toContain(`light/${other}/cmd/light1`);
    device.end(true);
    watch.end(true);
  });
});

describe('connectivity', () => {
  it('turns a device disconnected when the broker publishes its last will', async () => {
    const id = randomDeviceId();
    expect((await provision(id, { credential_source: 'root_secret', root_secret: ROOT_SECRET })).status).toBe(201);
    const device = light(id, { rootSecret: ROOT_SECRET });
    await device.start();
    await waitFor(async () => (await status(id)) === 'connected', { timeoutMs: 8000, what: 'connected' });
    const connectedAt = (await api('GET', `/v1/devices/${id}`, { key })).body.status_changed_at as string;
    await device.kill();
    await waitFor(async () => (await status(id)) === 'disconnected', { timeoutMs: 10_000, what: 'disconnected by the will' });
    const after = (await api('GET', `/v1/devices/${id}`, { key })).body;
    expect(Date.parse(after.status_changed_at as string)).toBeGreaterThanOrEqual(Date.parse(connectedAt));
  });

  it('shows connectivity fields only to partners holding health_read', async () => {
    const id = randomDeviceId();
    expect((await provision(id, {})).status).toBe(201);
    const blind = await partnerWithKey(['--access-all-devices']);
    const res = await api('GET', `/v1/devices/${id}`, { key: blind.key });
    expect(res.status).toBe(200);
    expect(res.body).not.toHaveProperty('status');
    expect(res.body).not.toHaveProperty('last_seen_at');
    expect(res.body).not.toHaveProperty('status_changed_at');
  });
});

describe('removal', () => {
  it('needs confirm, then cuts the broker credential: the device is dropped and cannot reconnect', async () => {
    const id = randomDeviceId();
    expect((await provision(id, { credential_source: 'root_secret', root_secret: ROOT_SECRET })).status).toBe(201);
    const device = light(id, { rootSecret: ROOT_SECRET });
    await device.start();
    const unconfirmed = await api('DELETE', `/v1/devices/${id}`, { key });
    expect([unconfirmed.status, unconfirmed.body.code]).toEqual([409, 'confirmation_required']);
    for (const confirm of [123, false, { id }]) {
      const mismatched = await api('DELETE', `/v1/devices/${id}`, { key, body: { confirm } });
      expect([mismatched.status, mismatched.body.code, confirm]).toEqual([409, 'confirmation_required', confirm]);
    }
    const dropped = new Promise<void>((resolve) => device.once('disconnect', () => resolve()));
    const removed = await api('DELETE', `/v1/devices/${id}?confirm=${id}`, { key });
    expect(removed.status).toBe(204);
    expect(removed.text).toBe('');
    await dropped;
    expect((await api('GET', `/v1/devices/${id}`, { key })).status).toBe(404);
    await device.stop();
    await expect(light(id, { rootSecret: ROOT_SECRET }).start()).rejects.toThrow();
  });

  it('a meter removed and provisioned again under its id starts disconnected: nothing of the removed one carries over', async () => {
    const reader = (await partnerWithKey(['--permissions', 'health_read,energy_read', '--access-all-devices'])).key;
    const id = randomDeviceId();
    const password = '0123456789abcdef'.repeat(2);
    const provisionMeter = () => provision(id, { credential_source: 'mqtt_password', mqtt_password: password, product: 'meter' });
    expect((await provisionMeter()).status).toBe(201);
    const meter = new SimulatedMeter({ brokerUrl: e2eFleet().mqttUrl, deviceId: id, password });
    meter.on('error', () => undefined);
    await meter.start();
    await waitFor(async () => (await status(id)) === 'connected', { timeoutMs: 8000, what: 'meter connected' });
    const dropped = new Promise<void>((resolve) => meter.once('disconnect', () => resolve()));
    expect((await api('DELETE', `/v1/devices/${id}?confirm=${id}`, { key })).status).toBe(204);
    await dropped;
    await meter.stop();
    expect((await provisionMeter()).status).toBe(201);

    // Nothing connects as the new device: it reads disconnected with null timestamps everywhere.
    const fresh = { status: 'disconnected', status_changed_at: null, last_seen_at: null };
    expect((await api('GET', `/v1/devices/${id}`, { key })).body).toMatchObject(fresh);
    const health = await api('GET', `/v1/devices/${id}/health`, { key });
    expect(health.body).toMatchObject({ ...fresh, telemetry: [] });
    const sample = await api('POST', `/v1/meter/devices/${id}/sample`, { key: reader });
    expect([sample.status, sample.body.code]).toEqual([409, 'device_offline']);
    expect(sample.body).toMatchObject(fresh);
  }, 30_000);
});

describe('organizations', () => {
  it('creates nodes with the admin CLI and places org-scoped provisioning inside the grant', async () => {
    const root = await admin('org', 'create', '--name', `Customer ${randomDeviceId()}`);
    const site = await admin('org', 'create', '--name', 'Site A', '--parent', String(root.id));
    expect(site).toEqual({ id: expect.any(Number), parent_id: root.id, name: 'Site A' });
    const scoped = await partnerWithKey(['--permissions', 'device_provisioning,config_read', '--grant', String(root.id)]);
    const id = randomDeviceId();
    const placed = await api('POST', `/v1/devices/${id}`, { key: scoped.key, body: { credential_format: 'derived-v1', org: 'Site A' } });
    expect([placed.status, placed.body.org]).toEqual([201, 'Site A']);
    const missing = await api('POST', `/v1/devices/${randomDeviceId()}`, { key: scoped.key, body: { credential_format: 'derived-v1', org: 'Nowhere' } });
    expect([missing.status, missing.body.error]).toEqual([400, "unknown organization 'Nowhere'"]);
    const tree = await api('GET', '/v1/org-tree', { key: scoped.key });
    expect(tree.body).toEqual({ nodes: [{ id: root.id, parent_id: null, name: root.name }, { id: site.id, parent_id: root.id, name: 'Site A' }] });
    expect((await api('GET', `/v1/devices/${id}`, { key: scoped.key })).status).toBe(200);
  });
});

describe('scope cache', () => {
  it('forgets a device moved out of a partner\'s scope at once', async () => {
    const [from, to] = [await admin('org', 'create', '--name', `From ${randomDeviceId()}`), await admin('org', 'create', '--name', `To ${randomDeviceId()}`)];
    const mover = await partnerWithKey(['--permissions', 'device_provisioning,config_write', '--access-all-devices']);
    // The state route's owner trusts the gateway's scope resolution, so this shows the gateway's cache.
    const watcherKey = (await partnerWithKey(['--permissions', 'state_read', '--grant', String(from.id)])).key;
    const id = randomDeviceId();
    expect((await api('POST', `/v1/devices/${id}`, { key: mover.key, body: { credential_format: 'derived-v1', org: from.name } })).status).toBe(201);
    expect((await api('GET', `/v1/devices/${id}/state`, { key: watcherKey })).status).toBe(200);
    expect((await api('PUT', `/v1/devices/${id}/org`, { key: mover.key, body: { org_node_id: to.id } })).status).toBe(204);
    expect((await api('GET', `/v1/devices/${id}/state`, { key: watcherKey })).status).toBe(404);
  });
});
