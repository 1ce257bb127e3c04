import mqtt, { type MqttClient } from 'mqtt';
import { deriveBrokerPassword } from '@fleet/device-protocol';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { api, partnerWithKey } from './support/api';
import { e2eFleet } from './support/fleet-env';

/**
 * Connectivity is never behind the device: a meter that has just connected and had its
 * `online` acknowledged by the broker is connected "at the moment of sending", so a live
 * reading asked right then is sent (202), and the device reads as connected.
 */

const SECRET = 'Conn-E2E-Secret!';
let partner: Awaited<ReturnType<typeof partnerWithKey>>;
const clients: MqttClient[] = [];

beforeAll(async () => {
  partner = await partnerWithKey(['--permissions', 'device_provisioning,energy_read,health_read', '--access-all-devices']);
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
});

async function provisionMeter(): Promise<string> {
  const id = randomDeviceId();
  const res = await api('POST', `/v1/devices/${id}`, {
    key: partner.key,
    body: { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET, product: 'meter' },
  });
  expect(res.status).toBe(201);
  return id;
}

/** Connects as the device protocol has a meter connect and resolves once the broker acknowledged its `online`. */
async function comeOnline(deviceId: string): Promise<void> {
  const client = await mqtt.connectAsync(e2eFleet().mqttUrl, {
    clientId: deviceId,
    username: deviceId,
    password: deriveBrokerPassword(SECRET, deviceId, 'meter'),
    clean: false,
    reconnectPeriod: 0,
    will: { topic: `meter/${deviceId}/status`, payload: Buffer.from('offline'), qos: 1, retain: true },
  });
  clients.push(client);
  await client.subscribeAsync(`meter/${deviceId}/sys/exe`, { qos: 2 });
  await client.publishAsync(`meter/${deviceId}/status`, 'online', { qos: 1, retain: true });
}

it('sends a live reading asked the moment a new meter’s online is acknowledged: 202 for every one of 10 meters', async () => {
  const ids = await Promise.all(Array.from({ length: 10 }, () => provisionMeter()));
  const answers: string[] = [];
  for (const id of ids) {
    await comeOnline(id);
    const res = await api('POST', `/v1/meter/devices/${id}/sample`, { key: partner.key });
    answers.push(`${res.status} ${String(res.body.code ?? res.body.state)}`);
  }
  expect(answers).toEqual(ids.map(() => '202 pending'));
}, 60_000);

it('shows a meter connected within moments of its first message, and disconnected once its will is published', async () => {
  const id = await provisionMeter();
  await comeOnline(id);
  const shown = await waitFor(async () => {
    const res = await api('GET', `/v1/devices/${id}`, { key: partner.key });
    return res.body.status === 'connected' ? res.body : undefined;
  }, { timeoutMs: 2000, intervalMs: 5, what: 'the meter shown connected' });
  expect(shown).toMatchObject({ status_changed_at: expect.any(String), last_seen_at: expect.any(String) });

  const client = clients.pop() as MqttClient;
  client.stream.destroy(); // no DISCONNECT: the broker publishes the will
  await waitFor(async () => (await api('GET', `/v1/devices/${id}`, { key: partner.key })).body.status === 'disconnected', {
    timeoutMs: 5000,
    what: 'the will to disconnect it',
  });
  const refused = await api('POST', `/v1/meter/devices/${id}/sample`, { key: partner.key });
  expect([refused.status, refused.body.code, refused.body.status]).toEqual([409, 'device_offline', 'disconnected']);
}, 30_000);
