import fs from 'node:fs';
import path from 'node:path';
import { connectAsync, type MqttClient } from 'mqtt';
import { freePort, isRunning, restartDelay, ROOT, startFleet, type Fleet, type FleetEvent, type ServiceView } from '@fleet/launcher';
import { dropDatabasesWithPrefix, uniqueId, waitFor } from '@fleet/test-kit';

// The launcher's API for fault tests (@fleet/launcher): replicas with their own
// identity, supervised restarts with backoff, kill/waitReady, a broker restart that keeps
// the broker's persistence, and a whole-fleet restart on the same data directory that keeps
// JetStream streams. It runs a small fleet of its own (two mqtt-bridge replicas on a private
// nats-server and broker), apart from the suite's shared fleet.

// The NATS client the workspace uses (a dependency of the test kit, not of this project).
interface JsManager {
  streams: { add(config: Record<string, unknown>): Promise<unknown>; info(name: string): Promise<{ state: { messages: number } }> };
}
interface NatsConnection {
  jetstreamManager(): Promise<JsManager>;
  jetstream(): { publish(subject: string, data: Uint8Array): Promise<unknown> };
  close(): Promise<void>;
}
const nats = require(require.resolve('nats', { paths: [path.join(ROOT, 'packages', 'test-kit')] })) as { connect(options: { servers: string }): Promise<NatsConnection> };

const run = uniqueId('fl');
const dataDir = path.join(ROOT, '.fleet', 'launcher', run);
const databasePrefix = `fleet_${run}_`;
const events: FleetEvent[] = [];
let fleet: Fleet | undefined;
let mqttPort: number;
const seenPids = new Set<number>();

function environOf(pid: number): Record<string, string> {
  const pairs = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
  return Object.fromEntries(pairs.map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]));
}

function remember(f: Fleet): void {
  for (const pid of [f.mqttPid, f.natsPid, ...f.services.map((s) => s.pid)]) if (pid) seenPids.add(pid);
}

async function start(): Promise<Fleet> {
  const started = await startFleet({
    services: ['mqtt-bridge'],
    replicas: { 'mqtt-bridge': 2 },
    supervise: true,
    backoff: { initialMs: 200 },
    privateNats: true,
    databasePrefix,
    dataDir,
    logDir: path.join(dataDir, 'logs'),
    mqttPort,
    gatewayPort: await freePort(),
    env: { LOG_LEVEL: 'info', NODE_ENV: 'test', SERVICE_INSTANCE: 'not-this-one' },
    onEvent: (event: FleetEvent) => events.push(event),
  });
  remember(started);
  return started;
}

async function adminClient(f: Fleet): Promise<MqttClient> {
  return connectAsync(f.mqttUrl, { username: f.mqttAdmin.username, password: f.mqttAdmin.password, clientId: `launcher-test-${run}-${Date.now()}`, reconnectPeriod: 0 });
}

/** The retained message on the test's topic, or undefined when the broker has none. */
async function retained(f: Fleet, topic: string): Promise<string | undefined> {
  const client = await adminClient(f);
  try {
    const message = new Promise<string>((resolve) => client.on('message', (t, payload, packet) => t === topic && packet.retain && resolve(payload.toString())));
    await client.subscribeAsync(topic, { qos: 1 });
    return await Promise.race([message, new Promise<undefined>((r) => setTimeout(() => r(undefined), 1000))]);
  } finally {
    await client.endAsync();
  }
}

beforeAll(async () => {
  mqttPort = await freePort();
  fleet = await start();
}, 60_000);

afterAll(async () => {
  await fleet?.stop();
  for (const pid of seenPids) if (isRunning(pid)) process.kill(pid, 'SIGKILL');
  await dropDatabasesWithPrefix(databasePrefix);
  fs.rmSync(dataDir, { recursive: true, force: true });
}, 30_000);

it('delays restarts 0.5 s doubling to 30 s', () => {
  expect([1, 2, 3, 4, 7, 8, 20].map((n) => restartDelay(n))).toEqual([500, 1000, 2000, 4000, 30_000, 30_000, 30_000]);
  expect(restartDelay(3, { initialMs: 200 })).toBe(800);
});

it('runs replicas as processes of their own, each with its own health port and SERVICE_INSTANCE', () => {
  const f = fleet as Fleet;
  expect(f.services.map((s) => [s.name, s.replica, s.instance, s.state, path.basename(s.logFile)])).toEqual([
    ['mqtt-bridge', 0, 'mqtt-bridge-0', 'ready', 'mqtt-bridge-0.log'],
    ['mqtt-bridge', 1, 'mqtt-bridge-1', 'ready', 'mqtt-bridge-1.log'],
  ]);
  const [a, b] = f.services as [ServiceView, ServiceView];
  expect(a.pid).not.toBe(b.pid);
  expect(a.healthPort).not.toBe(b.healthPort);
  for (const s of f.services) {
    const env = environOf(s.pid as number);
    expect([env.SERVICE_INSTANCE, env.HEALTH_PORT]).toEqual([s.instance, String(s.healthPort)]);
  }
  const state = JSON.parse(fs.readFileSync(f.stateFile as string, 'utf8')) as { services: { instance: string; pid: number }[] };
  expect(state.services.map((s) => [s.instance, s.pid])).toEqual(f.services.map((s) => [s.instance, s.pid]));
});

it('restarts a killed replica with the same identity and ports, with a growing delay while it keeps failing', async () => {
  const f = fleet as Fleet;
  const other = f.pidOf('mqtt-bridge', 0);
  const first = f.pidOf('mqtt-bridge', 1) as number;
  const healthPort = (f.services[1] as ServiceView).healthPort;

  await expect(f.kill('mqtt-bridge', { replica: 1 })).resolves.toEqual({ pid: first, code: null, signal: 'SIGKILL' });
  const second = await f.waitReady('mqtt-bridge', { replica: 1, timeoutMs: 20_000 });
  expect(second.pid).not.toBe(first);
  expect(second.healthPort).toBe(healthPort);
  seenPids.add(second.pid);
  expect(f.pidOf('mqtt-bridge', 1)).toBe(second.pid);
  expect((f.services[1] as ServiceView).pid).toBe(second.pid);
  expect((f.services[1] as ServiceView).restarts).toBe(1);
  expect(environOf(second.pid)).toMatchObject({ SERVICE_INSTANCE: 'mqtt-bridge-1', HEALTH_PORT: String(healthPort) });
  expect((await fetch(`http://127.0.0.1:${healthPort}/readyz`)).status).toBe(200);

  // Down again right away: the next delay doubles.
  await f.kill('mqtt-bridge', { replica: 1 });
  const third = await f.waitReady('mqtt-bridge', { replica: 1, timeoutMs: 20_000 });
  seenPids.add(third.pid);
  const scheduled = events.filter((e) => e.type === 'restart-scheduled');
  expect(scheduled.map((e) => [e.name, e.replica, e.pid, e.signal, e.attempt, e.delayMs])).toEqual([
    ['mqtt-bridge', 1, first, 'SIGKILL', 1, 200],
    ['mqtt-bridge', 1, second.pid, 'SIGKILL', 2, 400],
  ]);
  expect(scheduled[0]?.message).toContain('mqtt-bridge-1.log');
  expect(f.pidOf('mqtt-bridge', 0)).toBe(other);
}, 40_000);

it('restarts the broker on the same port and data, keeping what it persisted', async () => {
  const f = fleet as Fleet;
  const topic = `fleet-test/${run}/retained`;
  const client = await adminClient(f);
  await client.publishAsync(topic, 'kept', { qos: 1, retain: true });
  await client.endAsync();
  const before = f.mqttPid;

  const restarted = await f.restartBroker();
  seenPids.add(restarted.pid);
  expect(restarted).toEqual({ pid: f.mqttPid, url: f.mqttUrl });
  expect(restarted.pid).not.toBe(before);
  expect(isRunning(before)).toBe(false);
  expect(await retained(f, topic)).toBe('kept');
  expect(events.filter((e) => e.type === 'broker-start').map((e) => e.reason)).toEqual(['fleet start', 'restartBroker']);
}, 30_000);

it('stops every process, and a fleet started again on the same data directory keeps its JetStream streams and broker data', async () => {
  let f = fleet as Fleet;
  const stream = `LAUNCHER_${run.toUpperCase()}`;
  let nc = await nats.connect({ servers: f.natsUrl });
  await (await nc.jetstreamManager()).streams.add({ name: stream, subjects: [`launcher.${run}.>`] });
  await nc.jetstream().publish(`launcher.${run}.one`, new TextEncoder().encode('kept'));
  await nc.close();

  const pids = [f.mqttPid, f.natsPid as number, ...f.services.map((s) => s.pid as number)];
  await f.stop();
  fleet = undefined;
  expect(pids.filter(isRunning)).toEqual([]);
  expect(fs.existsSync(f.stateFile as string)).toBe(false);
  // Stopping cancels restarts: nothing comes back.
  const count = events.length;
  await new Promise((r) => setTimeout(r, 500));
  expect(events.slice(count)).toEqual([]);

  f = await start();
  fleet = f;
  expect(f.mqttUrl).toBe(`mqtt://127.0.0.1:${mqttPort}`);
  nc = await nats.connect({ servers: f.natsUrl });
  try {
    const info = await (await nc.jetstreamManager()).streams.info(stream);
    expect(info.state.messages).toBe(1);
  } finally {
    await nc.close();
  }
  expect(await retained(f, `fleet-test/${run}/retained`)).toBe('kept');
  await waitFor(() => f.services.every((s) => s.state === 'ready'), { timeoutMs: 5000, what: 'both replicas ready' });
}, 60_000);
