/**
 * Broker access through the authentication hook, end to end. device-registry keeps the broker
 * credentials in Postgres (BROKER_CREDENTIALS=hook) and serves the hook; a private RabbitMQ node
 * (MQTT and HTTP-auth plugins) asks it at every CONNECT, PUBLISH and SUBSCRIBE. Devices are
 * provisioned through the gateway and connect as the device protocol says: client id =
 * username = device id, the password derived from the root secret.
 */
import path from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { deriveBrokerPassword } from '@fleet/device-protocol';
import { freePort, startRabbitMqttBroker, type RabbitMqttBroker } from '@fleet/launcher';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { OwnFleet } from './support/own-fleet';

jest.setTimeout(120_000);

const PLATFORM = { username: 'fleet-platform', password: 'e2e-platform-Secret-1' };
const SECRET = 'Hook-E2e-Secret!';
let fleet: OwnFleet;
let broker: RabbitMqttBroker;
let key: string;
const clients: MqttClient[] = [];

beforeAll(async () => {
  const hookPort = await freePort();
  const mqttPort = await freePort();
  fleet = await OwnFleet.start({
    services: ['device-registry', 'gateway'],
    env: {
      BROKER_CREDENTIALS: 'hook',
      BROKER_HOOK_PORT: String(hookPort),
      BROKER_PLATFORM_USERNAME: PLATFORM.username,
      BROKER_PLATFORM_PASSWORD: PLATFORM.password,
      MQTT_URL: `mqtt://127.0.0.1:${mqttPort}`,
    },
  });
  broker = await startRabbitMqttBroker({ dataDir: path.join(fleet.dataDir, 'rabbitmq'), mqttPort, hookBaseUrl: `http://127.0.0.1:${hookPort}` });
  ({ key } = await fleet.partnerWithKey(['--permissions', 'device_provisioning,device_removal', '--access-all-devices']));
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
  await broker?.stop();
  await fleet?.destroy();
});

async function provision(secret = SECRET): Promise<string> {
  const id = randomDeviceId();
  const res = await fleet.api('POST', `/v1/devices/${id}`, { key, body: { product: 'light', credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: secret } });
  expect(res.status).toBe(201);
  return id;
}

async function remove(id: string): Promise<void> {
  expect((await fleet.api('DELETE', `/v1/devices/${id}?confirm=${id}`, { key })).status).toBe(204);
}

/** Connects as a device (or as anyone, with `as`); rejects with the broker's refusal. */
async function connect(id: string, options: { secret?: string; clientId?: string; as?: { username: string; password: string } } = {}): Promise<MqttClient> {
  const client = await mqtt.connectAsync(broker.url, {
    clientId: options.clientId ?? id,
    username: options.as?.username ?? id,
    password: options.as?.password ?? deriveBrokerPassword(options.secret ?? SECRET, id, 'light'),
    protocolVersion: 4,
    clean: true,
    reconnectPeriod: 0,
    connectTimeout: 15_000,
  });
  clients.push(client);
  return client;
}

const refused = (attempt: Promise<unknown>) => expect(attempt).rejects.toThrow(/Not authorized|Bad username or password/);
const closed = (client: MqttClient) => new Promise<void>((resolve) => (client.disconnected ? resolve() : client.once('close', () => resolve())));

describe('CONNECT', () => {
  it('lets a provisioned device in with its derived password, and nobody with a wrong one or another client id', async () => {
    const id = await provision();
    const device = await connect(id);
    expect(device.connected).toBe(true);
    await refused(connect(id, { secret: 'Wrong-E2e-Secret' }));
    await refused(connect(id, { clientId: randomDeviceId() }));
    await refused(connect(randomDeviceId()));
  });
});

describe('PUBLISH and SUBSCRIBE', () => {
  it('keeps a device in its own subtree: what the platform sends it arrives, a step outside closes its connection', async () => {
    const [a, b] = [await provision(), await provision()];
    const platform = await connect('platform', { clientId: 'e2e-platform', as: PLATFORM });
    const onA = await connect(a);
    await onA.subscribeAsync(`light/${a}/cmd/#`, { qos: 1 });
    const got = new Promise<string>((resolve) => onA.once('message', (topic, payload) => resolve(`${topic} ${payload.toString()}`)));
    await platform.publishAsync(`light/${a}/cmd/light1`, 'on', { qos: 1 });
    await expect(got).resolves.toBe(`light/${a}/cmd/light1 on`);

    // B listens under its own subtree; A publishing there is refused and nothing reaches B.
    const onB = await connect(b);
    await onB.subscribeAsync(`light/${b}/#`, { qos: 1 });
    const heardByB: string[] = [];
    onB.on('message', (topic) => heardByB.push(topic));
    const aClosed = closed(onA);
    onA.publish(`light/${b}/state`, 'spoofed', { qos: 1 });
    await aClosed;
    // A subscription spanning devices is refused the same way.
    const again = await connect(a);
    const againClosed = closed(again);
    again.subscribe('light/+/cmd/#', { qos: 1 });
    await againClosed;
    // The platform's own message to B still arrives, after A's refused one would have.
    const toB = new Promise<void>((resolve) => onB.on('message', (topic) => topic.endsWith('/probe') && resolve()));
    await platform.publishAsync(`light/${b}/probe`, 'x', { qos: 1 });
    await toB;
    expect(heardByB).toEqual([`light/${b}/probe`]);
  });
});

describe('removal and re-enrolment', () => {
  it('cuts a connected device off within a second of the removal, and refuses it after', async () => {
    const id = await provision();
    const device = await connect(id);
    const cut = closed(device);
    const started = Date.now();
    await remove(id);
    await cut;
    expect(Date.now() - started).toBeLessThan(1000);
    await refused(connect(id));
  });

  it('refuses a re-enrolled device’s old password and takes the new one', async () => {
    const id = await provision('First-E2e-Secret');
    await connect(id, { secret: 'First-E2e-Secret' });
    await remove(id);
    const res = await fleet.api('POST', `/v1/devices/${id}`, { key, body: { product: 'light', credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: 'Second-E2eSecret' } });
    expect(res.status).toBe(201);
    await refused(connect(id, { secret: 'First-E2e-Secret' }));
    expect((await connect(id, { secret: 'Second-E2eSecret' })).connected).toBe(true);
  });
});

describe('outages', () => {
  it('a restarted broker takes every device back with no credential reload', async () => {
    const ids = [await provision(), await provision(), await provision()];
    await broker.restart();
    for (const id of ids) expect((await connect(id)).connected).toBe(true);
  });

  it('while the hook cannot answer, connected devices keep working and new ones are refused; then it recovers by itself', async () => {
    const [online, newcomer] = [await provision(), await provision()];
    const platform = await connect('platform', { clientId: 'e2e-platform-2', as: PLATFORM });
    await platform.subscribeAsync('light/+/state', { qos: 1 });
    const states: string[] = [];
    platform.on('message', (topic, payload) => states.push(`${topic} ${payload.toString()}`));
    const device = await connect(online);
    await device.publishAsync(`light/${online}/state`, 'before', { qos: 1 });
    await waitFor(() => states.includes(`light/${online}/state before`), { what: 'the state published before the outage' });
    // RabbitMQ remembers, per connection, the topics it already authorized: those keep working.
    const registry = fleet.handle.pidOf('device-registry') as number;
    process.kill(registry, 'SIGSTOP');
    try {
      await device.publishAsync(`light/${online}/state`, 'during', { qos: 1 });
      await waitFor(() => states.includes(`light/${online}/state during`), { what: 'the state published during the outage' });
      await refused(connect(newcomer));
    } finally {
      process.kill(registry, 'SIGCONT');
    }
    await waitFor(async () => connect(newcomer).then(() => true, () => false), { what: 'a connect once the hook answers again', timeoutMs: 20_000 });
  });
});
