/**
 * The broker authentication and authorization hook over HTTP, against device rows in a real
 * Postgres database: EMQX's and RabbitMQ's forms, the rules, the one-second bound on what it
 * remembers, and a database out of reach.
 */
import { randomDeviceId } from '@fleet/test-kit';
import { BrokerHook } from '../src/broker/broker-hook';
import { CredentialCache } from '../src/broker/credential-cache';
import { HookServer } from '../src/broker/hook-server';
import { hashBrokerPassword } from '../src/domain/broker-password';
import { insertDevice } from '../src/store/devices';
import { openRegistryDb } from '../src/store/prisma';
import { createTestDb, logger, type TestDb } from './support';

const PLATFORM = { username: 'fleet-admin', password: 'platform-secret-1' };
const ROOTS = { light: 'light', meter: 'meter' };
const CACHE_MS = 1000;

let testDb: TestDb;
const servers: HookServer[] = [];
let url: string;
const light = randomDeviceId();
const meter = randomDeviceId();
const legacy = randomDeviceId();

async function startHook(cache: CredentialCache): Promise<string> {
  const server = new HookServer(new BrokerHook(cache, PLATFORM, ROOTS), logger);
  servers.push(server);
  return `http://127.0.0.1:${await server.listen(0, '127.0.0.1')}`;
}

beforeAll(async () => {
  testDb = await createTestDb();
  const device = async (deviceId: string, product: 'light' | 'meter', password: string | null) =>
    insertDevice(testDb.db, {
      deviceId,
      product,
      name: null,
      orgNodeId: 1,
      credentialSource: 'mqtt_password',
      settingsKeyCiphertext: null,
      brokerPasswordHash: password === null ? null : await hashBrokerPassword(password),
    });
  await device(light, 'light', 'pw-light');
  await device(meter, 'meter', 'pw-meter');
  await device(legacy, 'light', null);
  url = await startHook(new CredentialCache(testDb.db, CACHE_MS));
});

afterAll(async () => {
  for (const s of servers) await s.close();
  await testDb?.drop();
});

const emqx = async (path: 'authn' | 'authz', body: Record<string, string>, base = url) => {
  const res = await fetch(`${base}/mqtt/emqx/${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: res.status === 200 ? ((await res.json()) as { result: string }) : await res.text() };
};
type EmqxAnswer = { result: string; is_superuser?: boolean };
const connect = async (username: string, password: string, clientid = username) => (await emqx('authn', { clientid, username, password })).body as EmqxAnswer;
const may = async (username: string, action: string, topic: string) => (await emqx('authz', { clientid: username, username, action, topic })).body;
const rabbit = async (path: string, fields: Record<string, string>) => {
  const res = await fetch(`${url}/mqtt/rabbitmq/${path}`, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields).toString() });
  return `${res.status} ${await res.text()}`;
};

describe('EMQX: CONNECT', () => {
  it('lets a device in with client id = username = its id and its password', async () => {
    expect(await connect(light, 'pw-light')).toEqual({ result: 'allow', is_superuser: false });
    expect(await connect(meter, 'pw-meter')).toMatchObject({ result: 'allow' });
  });

  it('refuses a wrong password, another client id, an unknown device and a device with no stored hash', async () => {
    expect(await connect(light, 'pw-meter')).toMatchObject({ result: 'deny' });
    expect(await connect(light, 'pw-light', meter)).toMatchObject({ result: 'deny' });
    expect(await connect(randomDeviceId(), 'pw-light')).toMatchObject({ result: 'deny' });
    expect(await connect(legacy, '')).toMatchObject({ result: 'deny' });
    expect(await connect('not-a-device', 'pw-light')).toMatchObject({ result: 'deny' });
  });

  it('lets the platform identity in with any client id, and only with its password', async () => {
    expect(await connect(PLATFORM.username, PLATFORM.password, light)).toEqual({ result: 'allow', is_superuser: true });
    expect(await connect(PLATFORM.username, 'guess', 'fleet-bridge-0')).toEqual({ result: 'deny', is_superuser: false });
  });
});

describe('EMQX: PUBLISH and SUBSCRIBE', () => {
  it('keeps a device inside its own subtree under its product root', async () => {
    expect(await may(light, 'publish', `light/${light}/state`)).toEqual({ result: 'allow' });
    expect(await may(light, 'subscribe', `light/${light}/cmd/#`)).toEqual({ result: 'allow' });
    expect(await may(meter, 'subscribe', `meter/${meter}/sys/exe`)).toEqual({ result: 'allow' });
    for (const topic of [`light/${meter}/state`, `meter/${light}/iv`, 'light/+/cmd', '#', `light/${light}`.slice(0, -1), `$share/g/light/${light}/#`]) {
      expect(await may(light, 'subscribe', topic)).toEqual({ result: 'deny' });
      expect(await may(light, 'publish', topic)).toEqual({ result: 'deny' });
    }
  });

  it('lets the platform use every topic and refuses unknown actions', async () => {
    expect(await may(PLATFORM.username, 'subscribe', '$share/fleet-bridge/light/+/#')).toEqual({ result: 'allow' });
    expect(await may(light, 'retain', `light/${light}/state`)).toEqual({ result: 'deny' });
  });
});

describe('RabbitMQ forms', () => {
  it('answers user, vhost, resource and topic questions', async () => {
    expect(await rabbit('user', { username: light, password: 'pw-light' })).toBe('200 allow');
    expect(await rabbit('user', { username: light, password: 'nope' })).toBe('200 deny');
    expect(await rabbit('user', { username: light, password: 'pw-light', client_id: meter })).toBe('200 deny');
    expect(await rabbit('vhost', { username: light, vhost: '/', ip: '127.0.0.1' })).toBe('200 allow');
    expect(await rabbit('vhost', { username: light, vhost: 'other' })).toBe('200 deny');
    expect(await rabbit('resource', { username: light, vhost: '/', resource: 'queue', name: `mqtt-subscription-${light}qos1`, permission: 'configure' })).toBe('200 allow');
    expect(await rabbit('resource', { username: light, vhost: '/', resource: 'queue', name: `mqtt-subscription-${meter}qos1`, permission: 'read' })).toBe('200 deny');
    expect(await rabbit('resource', { username: light, vhost: '/', resource: 'exchange', name: 'amq.topic', permission: 'write' })).toBe('200 allow');
    expect(await rabbit('resource', { username: light, vhost: '/', resource: 'exchange', name: 'amq.direct', permission: 'write' })).toBe('200 deny');
    expect(await rabbit('topic', { username: light, vhost: '/', resource: 'topic', name: 'amq.topic', permission: 'write', routing_key: `light.${light}.state` })).toBe('200 allow');
    expect(await rabbit('topic', { username: light, vhost: '/', resource: 'topic', name: 'amq.topic', permission: 'read', routing_key: `light.${meter}.cmd` })).toBe('200 deny');
    expect(await rabbit('topic', { username: light, vhost: '/', resource: 'topic', name: 'amq.topic', permission: 'read', routing_key: 'light.*.cmd' })).toBe('200 deny');
  });
});

describe('what the hook remembers', () => {
  it('refuses a removed device within a second, and a re-enrolled device’s old password', async () => {
    const gone = randomDeviceId();
    const again = randomDeviceId();
    for (const id of [gone, again]) {
      await insertDevice(testDb.db, { deviceId: id, product: 'light', name: null, orgNodeId: 1, credentialSource: 'generate', settingsKeyCiphertext: null, brokerPasswordHash: await hashBrokerPassword('first') });
      expect(await connect(id, 'first')).toMatchObject({ result: 'allow' });
    }
    await testDb.db.device.delete({ where: { deviceId: gone } });
    await testDb.db.device.update({ where: { deviceId: again }, data: { brokerPasswordHash: await hashBrokerPassword('second') } });
    const changed = Date.now();
    const refusedAt = async (id: string, password: string) => {
      while ((await connect(id, password)).result !== 'deny') {
        if (Date.now() - changed > 3000) throw new Error(`${id} still let in after 3 s`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return Date.now() - changed;
    };
    expect(await refusedAt(gone, 'first')).toBeLessThanOrEqual(CACHE_MS + 200);
    expect(await refusedAt(again, 'first')).toBeLessThanOrEqual(CACHE_MS + 200);
    expect(await connect(again, 'second')).toMatchObject({ result: 'allow' });
  });
});

describe('a hook that cannot decide', () => {
  it('answers 503 (a refusal to every broker) when its database is out of reach', async () => {
    const unreachable = openRegistryDb('postgresql://postgres@127.0.0.1:1/fleet_nowhere');
    const base = await startHook(new CredentialCache(unreachable, CACHE_MS));
    const started = Date.now();
    const res = await emqx('authn', { clientid: light, username: light, password: 'pw-light' }, base);
    expect(res.status).toBe(503);
    expect(Date.now() - started).toBeLessThan(3000);
    // The platform identity needs no database.
    expect((await emqx('authn', { clientid: 'x', username: PLATFORM.username, password: PLATFORM.password }, base)).body).toMatchObject({ result: 'allow' });
    await unreachable.$disconnect();
  });

  it('refuses what is not a broker asking: other methods, paths and bodies', async () => {
    expect((await fetch(`${url}/mqtt/emqx/authn`)).status).toBe(405);
    expect((await fetch(`${url}/mqtt/other`, { method: 'POST' })).status).toBe(404);
    expect((await fetch(`${url}/mqtt/emqx/authn`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{nope' })).status).toBe(400);
    expect((await fetch(`${url}/mqtt/emqx/authn`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: 'x'.repeat(20_000) })).status).toBe(413);
  });
});
