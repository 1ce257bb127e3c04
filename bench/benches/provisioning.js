'use strict';
// Broker access at fleet scale. 1) Provisioning: BENCH_PROVISION_DEVICES devices (default
// 20,000, after 2,000 not counted) through the gateway, 32 requests in flight, with device-registry keeping broker
// credentials in Postgres behind the broker authentication hook (BROKER_CREDENTIALS=hook):
// credentials per second over the first 1,000 and over the last 1,000 (targets: last/first at
// least 0.8, at least 500/s). 2) Connects: BENCH_PROVISION_CONNECTS of those devices (default
// 2,000) connect at once to a broker that asks the hook (a private RabbitMQ node with its MQTT
// and HTTP-auth plugins), against the same clients connecting to the same broker with no
// authentication, in the same run.
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const fs = require('node:fs');
const { performance } = require('node:perf_hooks');
const mqtt = require('mqtt');
const { deriveBrokerPassword } = require('@fleet/device-protocol');
const { freePort, startRabbitMqttBroker } = require('@fleet/launcher');
const { gatewayAdmin, startPrivateFleet } = require('../lib/fleet-setup');

const SERVICES = ['device-registry', 'gateway'];
const SECRET = 'Bench-Prov-Secr!';
const DEVICES = Number(process.env.BENCH_PROVISION_DEVICES || 20000);
const CONNECTS = Number(process.env.BENCH_PROVISION_CONNECTS || 2000);
const IN_FLIGHT = 32;
/** Provisioned first and not counted: the processes' JIT, pools and caches warm up on these. */
const WARMUP = Number(process.env.BENCH_PROVISION_WARMUP || 2000);
const WINDOW = Math.min(1000, Math.floor(DEVICES / 2));
const TARGET_RATIO = 0.8;
const TARGET_RATE = 500;

const round = (x, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

/** POSTs through a keep-alive agent; resolves to the status. */
function post(agent, url, headers, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Provisions every id with IN_FLIGHT requests at a time; returns each completion's time (ms). */
async function provisionAll(gatewayUrl, key, ids, log) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const body = JSON.stringify({ product: 'light', credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET });
  const done = [];
  let next = 0;
  const failures = new Map();
  const worker = async () => {
    while (next < ids.length) {
      const id = ids[next++];
      const status = await post(agent, `${gatewayUrl}/v1/devices/${id}`, headers, body);
      if (status !== 201) failures.set(status, (failures.get(status) ?? 0) + 1);
      done.push(performance.now());
      if (done.length % 5000 === 0) log(`  ${done.length} provisioned`);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  agent.destroy();
  if (failures.size) throw new Error(`provisioning failures by status: ${JSON.stringify(Object.fromEntries(failures))}`);
  return done;
}

/** A device's wait before it connects again after a refusal (the simulator's reconnect period). */
const RETRY_AFTER_MS = 1000;
const RETRIES = 10;
/** CONNACK codes of MQTT 3.1.1 for a refused login: bad user name or password, not authorized. */
const REFUSED_LOGIN = new Set([4, 5]);

/**
 * Connects every device at once; returns connects per second, the clients (to end) and how many
 * devices were refused before they got in. A broker that cannot get the hook's answer in time
 * (RabbitMQ: `auth_http.request_timeout`) refuses the login as a wrong password; the device then
 * connects again, as a real one does, and the wait counts in the connects per second.
 */
async function connectAll(url, ids, withCredentials) {
  const t0 = performance.now();
  let refused = 0;
  const connectOne = async (id) => {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await mqtt.connectAsync(url, {
          clientId: id,
          ...(withCredentials ? { username: id, password: deriveBrokerPassword(SECRET, id, 'light') } : {}),
          protocolVersion: 4,
          clean: true,
          reconnectPeriod: 0,
          connectTimeout: 120_000,
        });
      } catch (err) {
        if (!REFUSED_LOGIN.has(err?.code) || attempt === RETRIES) throw err;
        if (attempt === 0) refused += 1;
        await new Promise((resolve) => setTimeout(resolve, RETRY_AFTER_MS));
      }
    }
  };
  const clients = await Promise.all(ids.map(connectOne));
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, perSecond: ids.length / seconds, clients, refused };
}

async function endAll(clients) {
  await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
}

async function run(ctx) {
  const { log } = ctx;
  const hookPort = await freePort();
  const brokers = [];
  let clients = [];
  let finished = false;
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-bench-provision-'));
  log(`starting ${SERVICES.join(', ')} with BROKER_CREDENTIALS=hook (own nats-server, databases, Redis prefix)...`);
  const priv = await startPrivateFleet({
    services: SERVICES,
    privateNats: true,
    logLevel: process.env.BENCH_LOG_LEVEL || 'warn',
    serviceEnv: { BROKER_CREDENTIALS: 'hook', BROKER_HOOK_PORT: String(hookPort) },
  });
  ctx.onCleanup(async () => {
    await endAll(clients);
    for (const b of brokers) await b.stop().catch(() => undefined);
    await priv.cleanup({ keepLogs: !finished });
    fs.rmSync(workDir, { recursive: true, force: true });
  });
  const { fleet, id } = priv;
  const partner = await gatewayAdmin(priv.gatewayDatabaseUrl, [
    'partner', 'create', '--name', `Bench provisioning ${id}`, '--permissions', 'all', '--access-all-devices', '--requests-per-min', '100000000',
  ]);
  const { key } = await gatewayAdmin(priv.gatewayDatabaseUrl, ['key', 'issue', '--partner', partner.id]);
  const idOf = (i) => `B${id.toUpperCase().slice(0, 4)}${i.toString(16).toUpperCase().padStart(7, '0')}`;
  const ids = Array.from({ length: DEVICES }, (_, i) => idOf(WARMUP + i));
  log(`warm-up: ${WARMUP} devices, not counted...`);
  await provisionAll(fleet.gatewayUrl, key, Array.from({ length: WARMUP }, (_, i) => idOf(i)), () => undefined);

  log(`provisioning ${DEVICES} devices through the gateway (${IN_FLIGHT} in flight)...`);
  const t0 = performance.now();
  const done = await provisionAll(fleet.gatewayUrl, key, ids, log);
  const total = (performance.now() - t0) / 1000;
  const first = WINDOW / ((done[WINDOW - 1] - t0) / 1000);
  const last = WINDOW / ((done[DEVICES - 1] - done[DEVICES - WINDOW - 1]) / 1000);
  const ratio = last / first;
  const perWindow = [];
  for (let k = WINDOW; k <= DEVICES; k += WINDOW) perWindow.push(Math.round(WINDOW / ((done[k - 1] - (k === WINDOW ? t0 : done[k - WINDOW - 1])) / 1000)));
  log(`credentials/s per ${WINDOW}: ${perWindow.join(' ')}`);

  const connectIds = ids.slice(0, Math.min(CONNECTS, DEVICES));
  log(`connecting ${connectIds.length} devices at once to a RabbitMQ node that asks the hook...`);
  const hooked = await startRabbitMqttBroker({ dataDir: path.join(workDir, 'rabbit-hook'), hookBaseUrl: `http://127.0.0.1:${hookPort}` });
  brokers.push(hooked);
  let result = await connectAll(hooked.url, connectIds, true);
  clients = result.clients;
  const viaHook = { seconds: result.seconds, perSecond: result.perSecond, refused: result.refused };
  await endAll(clients);
  clients = [];
  await hooked.stop();

  log(`connecting the same ${connectIds.length} clients at once to a RabbitMQ node with no authentication...`);
  const open = await startRabbitMqttBroker({ dataDir: path.join(workDir, 'rabbit-open') });
  brokers.push(open);
  result = await connectAll(open.url, connectIds, false);
  clients = result.clients;
  const noAuth = { seconds: result.seconds, perSecond: result.perSecond, refused: result.refused };
  await endAll(clients);
  clients = [];
  await open.stop();

  finished = true;
  return {
    bench: 'provisioning',
    title: 'Provisioning through the gateway with credentials in Postgres behind the broker hook; connects through the hook vs no authentication',
    settings: { devices: DEVICES, warmup: WARMUP, in_flight: IN_FLIGHT, window: WINDOW, connects: connectIds.length, broker: 'RabbitMQ 3.10 MQTT (private node)' },
    provisioning: { seconds: round(total, 2), per_s: round(DEVICES / total), first_per_s: round(first), last_per_s: round(last), last_over_first: round(ratio, 3) },
    connects: {
      via_hook_per_s: round(viaHook.perSecond),
      via_hook_s: round(viaHook.seconds, 2),
      via_hook_refused_first: viaHook.refused,
      no_auth_per_s: round(noAuth.perSecond),
      no_auth_s: round(noAuth.seconds, 2),
      no_auth_refused_first: noAuth.refused,
      ratio: round(viaHook.perSecond / noAuth.perSecond, 3),
    },
    targets: { last_over_first: TARGET_RATIO, per_s: TARGET_RATE },
    pass: ratio >= TARGET_RATIO && Math.min(first, last) >= TARGET_RATE,
  };
}

function table(r) {
  const p = r.provisioning;
  const c = r.connects;
  return {
    head: ['measure', 'value'],
    rows: [
      [`provisioning ${r.settings.devices} devices, ${r.settings.in_flight} in flight (s)`, String(p.seconds)],
      ['credentials / s, overall', String(p.per_s)],
      [`credentials / s, first ${r.settings.window}`, String(p.first_per_s)],
      [`credentials / s, last ${r.settings.window}`, String(p.last_per_s)],
      ['last / first', String(p.last_over_first)],
      [`connects / s, ${r.settings.connects} at once through the hook`, String(c.via_hook_per_s)],
      [`connects / s, ${r.settings.connects} at once, no authentication`, String(c.no_auth_per_s)],
      ['connects through the hook / no authentication', String(c.ratio)],
      ['devices refused at first through the hook (in after a retry 1 s later)', String(c.via_hook_refused_first ?? 0)],
    ],
    notes: [
      `targets: last/first >= ${r.targets.last_over_first}, first and last >= ${r.targets.per_s}/s   ${r.pass ? 'PASS' : 'MISSED'}`,
      `broker for the connects: ${r.settings.broker}`,
    ],
  };
}

module.exports = { name: 'provisioning', description: 'provisioning 20,000 devices with credentials behind the broker hook; 2,000 connects through it vs no auth', run, table };
