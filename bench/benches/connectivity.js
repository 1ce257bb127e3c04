'use strict';
// How soon the platform counts a device as connected: a meter connects and publishes `online`
// (QoS 1, retained, as the device protocol says); from the broker's PUBACK, the time until
// `GET /v1/devices/{id}` through the gateway shows `status: connected` (p50/p99 over 100 meters,
// one at a time; BENCH_CONNECTIVITY_DEVICES). The baseline, measured in the same run on the same broker, is a
// plain MQTT subscriber receiving that `online`. A second set of meters asks for a live reading
// the moment `online` is acknowledged and counts the answers (every one should be 202).
const { createHistogram, performance } = require('node:perf_hooks');
const { deriveBrokerPassword } = require('@fleet/device-protocol');
const mqtt = require('mqtt');
const { gatewayAdmin, startPrivateFleet } = require('../lib/fleet-setup');
const { leanHttpClient } = require('../lib/lean-http');

const SERVICES = ['device-registry', 'mqtt-bridge', 'meter', 'gateway'];
const SECRET = 'Bench-Conn-Secr!';
/** BENCH_CONNECTIVITY_DEVICES: meters measured one at a time (default 100). */
const DEVICE_COUNT = Number(process.env.BENCH_CONNECTIVITY_DEVICES || 100);
/** Meters that ask for a live reading right after `online`. */
const SAMPLE_DEVICES = 30;
/** Target from the issue: p99 from the first message to `connected`. */
const TARGET_P99_MS = 50;

const histogram = () => createHistogram({ lowest: 1, highest: 60_000_000, figures: 3 });
const ms = (us) => Math.round(us) / 1000;
const summary = (h) => ({ p50: ms(h.percentile(50)), p90: ms(h.percentile(90)), p99: ms(h.percentile(99)), max: ms(h.max), count: h.count });
const record = (h, elapsedMs) => h.record(Math.max(1, Math.round(elapsedMs * 1000)));

/** A meter as the device protocol has it connect: client id = username = device id, `offline` will. */
async function connectMeter(brokerUrl, deviceId) {
  const client = await mqtt.connectAsync(brokerUrl, {
    clientId: deviceId,
    username: deviceId,
    password: deriveBrokerPassword(SECRET, deviceId, 'meter'),
    protocolVersion: 4,
    clean: false,
    reconnectPeriod: 0,
    will: { topic: `meter/${deviceId}/status`, payload: Buffer.from('offline'), qos: 1, retain: true },
  });
  await client.subscribeAsync(`meter/${deviceId}/sys/exe`, { qos: 2 });
  return client;
}

async function run(ctx) {
  const { log } = ctx;
  const deviceCount = DEVICE_COUNT;
  const clients = [];
  let watcher;
  let finished = false;
  log(`starting ${SERVICES.join(', ')} (own nats-server, broker, databases, Redis prefix)...`);
  const priv = await startPrivateFleet({ services: SERVICES, privateNats: true, logLevel: process.env.BENCH_LOG_LEVEL || 'warn' });
  const { fleet, id } = priv;
  ctx.onCleanup(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    if (watcher) await watcher.endAsync(true).catch(() => undefined);
    await priv.cleanup({ keepLogs: !finished });
  });
  const partner = await gatewayAdmin(priv.gatewayDatabaseUrl, [
    'partner', 'create', '--name', `Bench connectivity ${id}`, '--permissions', 'all', '--access-all-devices', '--requests-per-min', '100000000',
  ]);
  const { key } = await gatewayAdmin(priv.gatewayDatabaseUrl, ['key', 'issue', '--partner', partner.id]);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const api = async (method, route, body) => {
    const res = await fetch(`${fleet.gatewayUrl}${route}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: await res.json().catch(() => ({})) };
  };
  // The timed requests go on one keep-alive connection of the lean client (lib/lean-http.js):
  // fetch costs this process several milliseconds a request on the two cores it shares with the
  // fleet, which the polling would count as the platform's delay.
  const lean = leanHttpClient(fleet.gatewayUrl, 1);
  ctx.onCleanup(async () => lean.close());
  const timed = async (method, route) => {
    const res = await lean.request(method, route, headers);
    let body = {};
    try {
      body = JSON.parse(res.body);
    } catch {
      // not JSON: counted by its status
    }
    return { status: res.status, body };
  };

  // The baseline: a plain subscriber to every meter's status on the same broker.
  const delivered = new Map();
  watcher = await mqtt.connectAsync(fleet.mqttUrl, { username: fleet.mqttAdmin.username, password: fleet.mqttAdmin.password, clean: true, reconnectPeriod: 0 });
  watcher.on('message', (topic, payload) => {
    if (payload.toString() === 'online') delivered.get(topic.split('/')[1])?.(performance.now());
  });
  await watcher.subscribeAsync('meter/+/status', { qos: 1 });

  const total = deviceCount + SAMPLE_DEVICES;
  log(`provisioning ${total} meters...`);
  const ids = [];
  for (let i = 0; i < total; i++) {
    const deviceId = `C${id.toUpperCase().slice(0, 5)}${i.toString(16).toUpperCase().padStart(6, '0')}`;
    const res = await api('POST', `/v1/devices/${deviceId}`, { product: 'meter', credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET });
    if (res.status !== 201) throw new Error(`provisioning ${deviceId} answered ${res.status}: ${JSON.stringify(res.body)}`);
    ids.push(deviceId);
  }

  /** Connects a meter, publishes `online` and resolves with the PUBACK time and when the plain subscriber got it. */
  const goOnline = async (deviceId) => {
    const client = await connectMeter(fleet.mqttUrl, deviceId);
    clients.push(client);
    const atWatcher = new Promise((resolve) => delivered.set(deviceId, resolve));
    await client.publishAsync(`meter/${deviceId}/status`, 'online', { qos: 1, retain: true });
    return { acked: performance.now(), atWatcher };
  };

  log(`${deviceCount} meters, one at a time: PUBACK of 'online' → GET /v1/devices/{id} shows connected...`);
  const toConnected = histogram();
  const toWatcher = histogram();
  const getLatency = histogram();
  const pollCounts = [];
  const problems = [];
  for (const deviceId of ids.slice(0, deviceCount)) {
    const { acked, atWatcher } = await goOnline(deviceId);
    const deadline = acked + 10_000;
    let shown;
    let polls = 0;
    while (performance.now() < deadline) {
      const asked = performance.now();
      const res = await timed('GET', `/v1/devices/${deviceId}`);
      record(getLatency, performance.now() - asked);
      polls += 1;
      if (res.status === 200 && res.body.status === 'connected') {
        pollCounts.push(polls);
        shown = performance.now();
        break;
      }
    }
    if (shown === undefined) problems.push(`${deviceId} not shown connected within 10 s`);
    else record(toConnected, shown - acked);
    record(toWatcher, Math.max(0, (await atWatcher) - acked));
  }

  log(`${SAMPLE_DEVICES} meters ask for a live reading the moment 'online' is acknowledged...`);
  const sampleAnswers = {};
  const toSampleAnswer = histogram();
  for (const deviceId of ids.slice(deviceCount)) {
    const { acked } = await goOnline(deviceId);
    const res = await timed('POST', `/v1/meter/devices/${deviceId}/sample`);
    record(toSampleAnswer, performance.now() - acked);
    const key = res.status === 409 ? `409 ${res.body.code}` : String(res.status);
    sampleAnswers[key] = (sampleAnswers[key] ?? 0) + 1;
  }

  const connected = summary(toConnected);
  const baseline = summary(toWatcher);
  const refused = SAMPLE_DEVICES - (sampleAnswers['202'] ?? 0);
  finished = problems.length === 0;
  return {
    bench: 'connectivity',
    title: "From a meter's first message to the platform showing it connected, beside a plain subscriber receiving it",
    settings: { devices: deviceCount, sample_devices: SAMPLE_DEVICES },
    fleet_to_connected_ms: connected,
    baseline_to_subscriber_ms: baseline,
    get_ms: summary(getLatency),
    gets_until_connected: { one: pollCounts.filter((n) => n === 1).length, more: pollCounts.filter((n) => n > 1).length, max: Math.max(0, ...pollCounts) },
    sample_answers: sampleAnswers,
    sample_answer_ms: summary(toSampleAnswer),
    target_p99_ms: TARGET_P99_MS,
    pass: problems.length === 0 && connected.p99 <= TARGET_P99_MS && refused === 0,
    invalid: problems.length ? problems.slice(0, 5) : undefined,
  };
}

function table(result) {
  const row = (label, s) => [label, s.p50.toFixed(3), s.p90.toFixed(3), s.p99.toFixed(3), s.max.toFixed(3), String(s.count)];
  const answers = Object.entries(result.sample_answers).map(([k, v]) => `${v}× ${k}`).join(', ');
  const refused = result.settings.sample_devices - (result.sample_answers['202'] ?? 0);
  return {
    head: ['from the PUBACK of online to', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'devices'],
    rows: [
      row('GET /v1/devices/{id} shows connected', result.fleet_to_connected_ms),
      row('a plain subscriber receives it (baseline)', result.baseline_to_subscriber_ms),
      row('each GET /v1/devices/{id} (one poll)', result.get_ms),
      row('POST .../sample answered', result.sample_answer_ms),
    ],
    notes: [
      `GETs until connected: the first showed it for ${result.gets_until_connected.one} meters, ${result.gets_until_connected.more} needed more (at most ${result.gets_until_connected.max})`,
      `live reading asked right after online: ${answers}   ${refused === 0 ? 'OK' : 'REFUSED'}`,
      `to connected p99 ${result.fleet_to_connected_ms.p99.toFixed(3)} ms (target ≤ ${result.target_p99_ms} ms; the GET polls back to back, so this includes one request)   ${result.fleet_to_connected_ms.p99 <= result.target_p99_ms ? 'OK' : 'MISSED'}`,
    ],
  };
}

module.exports = {
  name: 'connectivity',
  description: "a meter's first message → GET /v1/devices/{id} shows connected (p99 over 100 meters), and live readings asked right after online",
  run,
  table,
};
