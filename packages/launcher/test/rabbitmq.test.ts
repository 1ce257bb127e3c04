/**
 * startRabbitMqttBroker (src/rabbitmq.js): a private RabbitMQ 3.10 node as an MQTT broker, either
 * anonymous (the benchmarks' baseline) or with logins and permissions asked of an HTTP hook
 * (rabbitmq_auth_backend_http). The hook here is a tiny HTTP server that records what RabbitMQ
 * sends it; the findings (fields, refusals, QoS 2, retained, last will) are in the README.
 * Each broker start takes several seconds (about 8 s for a new node, 5 s for a restart).
 */
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { IClientOptions, IPublishPacket, MqttClient } from 'mqtt';
import { isRunning, ROOT, startRabbitMqttBroker, type RabbitMqttBroker } from '@fleet/launcher';

// The MQTT client the workspace uses (a dependency of the device protocol package, not of the launcher).
const mqtt = require(require.resolve('mqtt', { paths: [path.join(ROOT, 'packages', 'device-protocol')] })) as typeof import('mqtt');

jest.setTimeout(180_000);

const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-rabbitmq-test-'));
const brokers: RabbitMqttBroker[] = [];
const clients: MqttClient[] = [];

afterAll(async () => {
  for (const client of clients) client.end(true);
  for (const broker of brokers) await broker.stop();
  fs.rmSync(workDir, { recursive: true, force: true });
});

const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function start(options: { name: string; hookBaseUrl?: string }): Promise<RabbitMqttBroker> {
  const began = Date.now();
  const broker = await startRabbitMqttBroker({ dataDir: path.join(workDir, options.name), hookBaseUrl: options.hookBaseUrl });
  console.log(`RabbitMQ node ${broker.nodeName} (${options.name}) answered MQTT after ${Date.now() - began} ms`);
  brokers.push(broker);
  return broker;
}

async function connect(broker: RabbitMqttBroker, options: IClientOptions = {}): Promise<MqttClient> {
  const client = await mqtt.connectAsync(broker.url, { protocolVersion: 4, reconnectPeriod: 0, connectTimeout: 10_000, ...options });
  clients.push(client);
  return client;
}

/** Messages a client receives, and a way to wait for the next one on a topic. */
function inbox(client: MqttClient) {
  const messages: { topic: string; payload: string; packet: IPublishPacket }[] = [];
  client.on('message', (topic, payload, packet) => messages.push({ topic, payload: payload.toString(), packet }));
  return {
    messages,
    async next(topic: string, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = messages.find((m) => m.topic === topic);
        if (found) return found;
        if (Date.now() > deadline) return undefined;
        await delay(20);
      }
    },
  };
}

const closed = (client: MqttClient) => new Promise<void>((resolve) => client.once('close', () => resolve()));

/** Whether the client's connection closes within timeoutMs. */
async function closesWithin(client: MqttClient, timeoutMs: number): Promise<boolean> {
  if (!client.connected) return true;
  return Promise.race([closed(client).then(() => true), delay(timeoutMs).then(() => false)]);
}

/** What becomes of a client's request that the broker may refuse: an answer, a closed connection, or nothing. */
async function outcome<T>(client: MqttClient, request: Promise<T>, timeoutMs = 5000): Promise<{ kind: 'answer'; value: T } | { kind: 'closed' } | { kind: 'error'; error: Error } | { kind: 'nothing' }> {
  const closing = closed(client).then(() => ({ kind: 'closed' as const }));
  const answered = request.then(
    (value) => ({ kind: 'answer' as const, value }),
    (error: Error) => ({ kind: 'error' as const, error }),
  );
  return Promise.race([answered, closing, delay(timeoutMs).then(() => ({ kind: 'nothing' as const }))]);
}

describe('startRabbitMqttBroker without a hook (anonymous, the benchmarks\' baseline)', () => {
  let broker: RabbitMqttBroker;

  beforeAll(async () => {
    broker = await start({ name: 'anonymous' });
  });

  it('listens only on 127.0.0.1 for MQTT and answers rabbitmqctl for its own node', async () => {
    expect(broker.url).toBe(`mqtt://127.0.0.1:${broker.port}`);
    expect(broker.nodeName).toMatch(/^fleet-[0-9a-f]+@localhost$/);
    expect(broker.pid).toBeGreaterThan(0);
    const status = await broker.rabbitmqctl('status');
    expect(status).toContain(`OS PID: ${broker.pid}`);
    expect(status).toContain('rabbitmq_mqtt');
    expect(status).toContain(`Interface: 127.0.0.1, port: ${broker.port}, protocol: mqtt`);
    expect(status).not.toMatch(/protocol: amqp\b/);
  });

  it('lets a client with no credentials subscribe and publish at QoS 1', async () => {
    const client = await connect(broker, { clientId: 'anon-1' });
    const received = inbox(client);
    const granted = await client.subscribeAsync('light/ABC/#', { qos: 1 });
    expect(granted.map((g) => g.qos)).toEqual([1]);
    await client.publishAsync('light/ABC/state', 'on', { qos: 1 });
    const message = await received.next('light/ABC/state');
    expect(message?.payload).toBe('on');
    expect(message?.packet.qos).toBe(1);
  });

  it('grants QoS 1 for a QoS 2 subscription and acknowledges a QoS 2 publish with a PUBACK (QoS 2 is downgraded to 1)', async () => {
    const client = await connect(broker, { clientId: 'anon-qos2' });
    const received = inbox(client);
    const acks: string[] = [];
    client.on('packetreceive', (packet) => {
      if (['puback', 'pubrec', 'pubcomp'].includes(packet.cmd)) acks.push(packet.cmd);
    });
    const granted = await client.subscribeAsync('light/Q2/#', { qos: 2 });
    expect(granted.map((g) => g.qos)).toEqual([1]);
    await client.publishAsync('light/Q2/state', 'q2', { qos: 2 });
    const message = await received.next('light/Q2/state');
    expect(message?.packet.qos).toBe(1);
    expect(acks).toEqual(['puback']);
  });

  it('keeps a retained message for a later subscriber to the exact topic, not to a wildcard', async () => {
    const publisher = await connect(broker, { clientId: 'anon-retain-pub' });
    await publisher.publishAsync('light/R1/config', 'kept', { qos: 1, retain: true });
    const exact = await connect(broker, { clientId: 'anon-retain-exact' });
    const exactInbox = inbox(exact);
    await exact.subscribeAsync('light/R1/config', { qos: 1 });
    const kept = await exactInbox.next('light/R1/config');
    expect(kept?.payload).toBe('kept');
    expect(kept?.packet.retain).toBe(true);
    const wildcard = await connect(broker, { clientId: 'anon-retain-wildcard' });
    const wildcardInbox = inbox(wildcard);
    await wildcard.subscribeAsync('light/R1/#', { qos: 1 });
    expect(await wildcardInbox.next('light/R1/config', 2000)).toBeUndefined();
  });

  it('publishes the last will of a client whose connection drops', async () => {
    const watcher = await connect(broker, { clientId: 'anon-will-watcher' });
    const watched = inbox(watcher);
    await watcher.subscribeAsync('light/W1/status', { qos: 1 });
    const device = await connect(broker, { clientId: 'anon-will-device', will: { topic: 'light/W1/status', payload: Buffer.from('offline'), qos: 1, retain: false } });
    device.stream.destroy();
    const will = await watched.next('light/W1/status');
    expect(will?.payload).toBe('offline');
    // A clean DISCONNECT discards the will.
    const polite = await connect(broker, { clientId: 'anon-will-polite', will: { topic: 'light/W1/polite', payload: Buffer.from('offline'), qos: 1, retain: false } });
    await watcher.subscribeAsync('light/W1/polite', { qos: 1 });
    await polite.endAsync();
    expect(await watched.next('light/W1/polite', 2000)).toBeUndefined();
  });

  it('stop() leaves no process behind', async () => {
    const pid = broker.pid!;
    const began = Date.now();
    await broker.stop();
    console.log(`RabbitMQ node ${broker.nodeName} stopped in ${Date.now() - began} ms`);
    expect(isRunning(pid)).toBe(false);
    expect(broker.pid).toBeUndefined();
    await expect(broker.rabbitmqctl('status')).rejects.toThrow();
  });
});

describe('startRabbitMqttBroker with an HTTP hook', () => {
  /** What RabbitMQ sent the hook: one entry per request, the path's last segment and the form fields. */
  const calls: { path: string; fields: Record<string, string> }[] = [];
  let hook: http.Server;
  let broker: RabbitMqttBroker;
  /** When set, the hook answers 500 to everything. */
  let failing = false;
  const device = { username: 'dev1', password: 'pw1' };
  // A user allowed everything, to see what reaches the broker from a refused publish.
  const spy = { username: 'spy', password: 'spy-pw' };

  function decide(kind: string, fields: Record<string, string>): 'allow' | 'deny' {
    if (kind === 'user') {
      const ok = (fields.username === device.username && fields.password === device.password) || (fields.username === spy.username && fields.password === spy.password);
      return ok ? 'allow' : 'deny';
    }
    if (kind === 'topic' && fields.username === device.username) return fields.routing_key?.startsWith('light.dev1.') ? 'allow' : 'deny';
    return 'allow';
  }

  beforeAll(async () => {
    hook = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        const kind = (req.url ?? '').replace(/^\/mqtt\/rabbitmq\//, '');
        const fields = Object.fromEntries(new URLSearchParams(body));
        calls.push({ path: kind, fields });
        if (failing) return void res.writeHead(500).end('down');
        res.writeHead(200, { 'content-type': 'text/plain' }).end(decide(kind, fields));
      });
    });
    hook.listen(0, '127.0.0.1');
    await once(hook, 'listening');
    const { port } = hook.address() as AddressInfo;
    broker = await start({ name: 'hook', hookBaseUrl: `http://127.0.0.1:${port}` });
  });

  afterAll(async () => {
    hook.close();
    // The fields RabbitMQ 3.10 sends to each path, one example each (for the README).
    const examples = new Map<string, Record<string, string>>();
    for (const call of calls) if (!examples.has(`${call.path} ${Object.keys(call.fields).join(',')}`)) examples.set(`${call.path} ${Object.keys(call.fields).join(',')}`, call.fields);
    console.log(`hook requests (${calls.length}):\n${[...examples].map(([key, fields]) => `${key}\n  ${new URLSearchParams(fields).toString()}`).join('\n')}`);
  });

  it('refuses a CONNECT with no credentials or a wrong password (CONNACK 4, bad username or password)', async () => {
    await expect(connect(broker, { clientId: 'nobody' })).rejects.toMatchObject({ code: 4 });
    await expect(connect(broker, { clientId: 'dev1', username: device.username, password: 'wrong' })).rejects.toMatchObject({ code: 4 });
    const login = calls.find((c) => c.path === 'user' && c.fields.password === 'wrong');
    // The MQTT client id reaches the hook's user path (and the vhost and topic paths, see below).
    expect(login?.fields).toEqual({ username: 'dev1', password: 'wrong', vhost: '/', client_id: 'dev1' });
  });

  it('lets the device in and delivers what it publishes under light/dev1/ (MQTT / is . in the routing key the hook sees)', async () => {
    const subscriber = await connect(broker, { clientId: 'dev1-sub', ...device });
    const received = inbox(subscriber);
    expect((await subscriber.subscribeAsync('light/dev1/#', { qos: 1 })).map((g) => g.qos)).toEqual([1]);
    const publisher = await connect(broker, { clientId: 'dev1', ...device });
    await publisher.publishAsync('light/dev1/x', 'hello', { qos: 1 });
    expect((await received.next('light/dev1/x'))?.payload).toBe('hello');

    const vhost = calls.find((c) => c.path === 'vhost' && c.fields.client_id === 'dev1');
    expect(vhost?.fields).toEqual({ username: 'dev1', vhost: '/', ip: '127.0.0.1', tags: '', client_id: 'dev1' });
    const read = calls.find((c) => c.path === 'topic' && c.fields.permission === 'read' && c.fields.routing_key === 'light.dev1.#');
    expect(read?.fields).toMatchObject({ username: 'dev1', vhost: '/', resource: 'topic', name: 'amq.topic', 'variable_map.client_id': 'dev1-sub' });
    const write = calls.find((c) => c.path === 'topic' && c.fields.permission === 'write' && c.fields.routing_key === 'light.dev1.x');
    expect(write?.fields).toMatchObject({ username: 'dev1', vhost: '/', resource: 'topic', name: 'amq.topic', 'variable_map.client_id': 'dev1' });
    expect(calls.filter((c) => c.path === 'resource').map((c) => `${c.fields.resource} ${c.fields.permission}`)).toEqual(expect.arrayContaining(['queue configure', 'queue read', 'exchange write']));
  });

  it('closes the connection of a device that publishes outside its topics, and delivers nothing', async () => {
    const watcher = await connect(broker, { clientId: 'spy', ...spy });
    const seen = inbox(watcher);
    await watcher.subscribeAsync('light/#', { qos: 1 });
    const publisher = await connect(broker, { clientId: 'dev1-bad-pub', ...device });
    const result = await outcome(publisher, publisher.publishAsync('light/other/x', 'intrusion', { qos: 1 }));
    console.log(`refused QoS 1 publish: ${result.kind}`);
    expect(result.kind).toBe('closed');
    // At QoS 0 too (there is no PUBACK to withhold).
    const qos0 = await connect(broker, { clientId: 'dev1-bad-pub0', ...device });
    qos0.publish('light/other/y', 'intrusion', { qos: 0 });
    expect(await closesWithin(qos0, 3000)).toBe(true);
    expect(await seen.next('light/other/x', 1000)).toBeUndefined();
    expect(await seen.next('light/other/y', 1000)).toBeUndefined();
    expect(calls.find((c) => c.path === 'topic' && c.fields.routing_key === 'light.other.x')?.fields.permission).toBe('write');
  });

  it('closes the connection of a device that subscribes outside its topics (no SUBACK, not even for the allowed filters of the same SUBSCRIBE)', async () => {
    const client = await connect(broker, { clientId: 'dev1-bad-sub', ...device });
    const suback: unknown[] = [];
    client.on('packetreceive', (packet) => packet.cmd === 'suback' && suback.push(packet));
    const result = await outcome(client, client.subscribeAsync(['light/dev1/ok', 'light/other/#'], { qos: 1 }));
    console.log(`refused subscribe: ${result.kind}${result.kind === 'error' ? ` (${result.error.message})` : ''}`);
    expect(['closed', 'error']).toContain(result.kind);
    expect(await closesWithin(client, 3000)).toBe(true);
    expect(suback).toEqual([]);
    expect(calls.find((c) => c.path === 'topic' && c.fields.routing_key === 'light.other.#')?.fields.permission).toBe('read');
  });

  it('asks the hook twice per CONNECT, five times per new subscription, three times for the first publish to a topic and not again for that topic', async () => {
    const asked = (from: number) => calls.slice(from).map((c) => [c.path, c.fields.resource, c.fields.permission, c.fields.routing_key ?? c.fields.name].filter(Boolean).join(' '));
    let mark = calls.length;
    const client = await connect(broker, { clientId: 'dev1-count', ...device });
    expect(asked(mark)).toEqual(['user', 'vhost']);
    mark = calls.length;
    await client.subscribeAsync('light/dev1/count', { qos: 1 });
    const subscribeCalls = asked(mark);
    mark = calls.length;
    await client.publishAsync('light/dev1/count', '1', { qos: 1 });
    const firstPublishCalls = asked(mark);
    mark = calls.length;
    await client.publishAsync('light/dev1/count', '2', { qos: 1 });
    expect(asked(mark)).toEqual([]);
    console.log(`hook calls for a subscription: ${JSON.stringify(subscribeCalls)}\nfor a topic's first publish: ${JSON.stringify(firstPublishCalls)}`);
    expect(subscribeCalls).toHaveLength(5);
    expect(firstPublishCalls).toEqual(['topic topic write light.dev1.count', 'resource exchange write amq.topic', 'topic topic write light.dev1.count']);
  });

  it('refuses logins while the hook answers with an error (CONNACK 4)', async () => {
    failing = true;
    try {
      await expect(connect(broker, { clientId: 'dev1-hook-failing', ...device })).rejects.toMatchObject({ code: 4 });
    } finally {
      failing = false;
    }
  });

  it('accepts the device again after restart(), with no credential reload', async () => {
    const before = broker.pid!;
    const began = Date.now();
    await broker.restart();
    console.log(`RabbitMQ node ${broker.nodeName} restarted in ${Date.now() - began} ms`);
    expect(isRunning(before)).toBe(false);
    expect(broker.pid).toBeGreaterThan(0);
    expect(broker.pid).not.toBe(before);
    const subscriber = await connect(broker, { clientId: 'dev1-sub-2', ...device });
    const received = inbox(subscriber);
    await subscriber.subscribeAsync('light/dev1/#', { qos: 1 });
    const publisher = await connect(broker, { clientId: 'dev1', ...device });
    await publisher.publishAsync('light/dev1/after-restart', 'again', { qos: 1 });
    expect((await received.next('light/dev1/after-restart'))?.payload).toBe('again');
  });

  it('stop() leaves no process behind', async () => {
    const pid = broker.pid!;
    await broker.stop();
    expect(isRunning(pid)).toBe(false);
    await expect(broker.rabbitmqctl('status')).rejects.toThrow();
  });
});
