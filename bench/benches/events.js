'use strict';
// Push events from a device's message to a signed delivery at a receiver on this machine.
// Meters toggle their connectivity (`offline`, then `online`, on their status topic, QoS 1, as
// the device protocol has it); each toggle is one device message and one event
// (device.disconnected / device.connected): bridge → registry (status and event in one
// transaction) → outbox relay → PARTNER_EVENTS → events fan-out → signed POST. Each meter waits
// for its delivery before its next toggle (toggles closer than a connectivity batch would merge),
// and the meters run side by side (BENCH_EVENTS_DEVICES, default 100; BENCH_EVENTS_TOGGLES each,
// default 20). Reported: events delivered per second and the time from the PUBACK of a toggle
// to its delivery (p50/p99). The baseline, in the same run on the same broker and devices, is
// the bridge's capture rate: the same meters publish status messages as fast as their PUBACKs
// allow (no toggles, so no events) and DEVICE_IN's count tells how many the bridge stored per
// second. Every delivery's signature is checked with the `standardwebhooks` package.
const { createHistogram, performance } = require('node:perf_hooks');
const { deriveBrokerPassword } = require('@fleet/device-protocol');
const { WebhookReceiver } = require('@fleet/test-kit');
const mqtt = require('mqtt');
const { connect } = require('nats');
const { gatewayAdmin, startPrivateFleet } = require('../lib/fleet-setup');

const SERVICES = ['device-registry', 'mqtt-bridge', 'events', 'gateway'];
const SECRET = 'Bench-Event-Sec!';
const DEVICE_COUNT = Number(process.env.BENCH_EVENTS_DEVICES || 100);
const TOGGLES = Number(process.env.BENCH_EVENTS_TOGGLES || 20);
/** Status messages each meter publishes for the capture baseline. */
const CAPTURE_MESSAGES = Number(process.env.BENCH_EVENTS_CAPTURE_MESSAGES || 50);
/** How long one delivery may take before the run is called invalid. */
const DELIVERY_TIMEOUT_MS = 15_000;

const histogram = () => createHistogram({ lowest: 1, highest: 60_000_000, figures: 3 });
const ms = (us) => Math.round(us) / 1000;
const summary = (h) => ({ p50: ms(h.percentile(50)), p90: ms(h.percentile(90)), p99: ms(h.percentile(99)), max: ms(h.max), count: h.count });

async function connectMeter(brokerUrl, deviceId) {
  return mqtt.connectAsync(brokerUrl, {
    clientId: deviceId,
    username: deviceId,
    password: deriveBrokerPassword(SECRET, deviceId, 'meter'),
    protocolVersion: 4,
    clean: true,
    reconnectPeriod: 0,
    will: { topic: `meter/${deviceId}/status`, payload: Buffer.from('offline'), qos: 1, retain: true },
  });
}

async function run(ctx) {
  const { log } = ctx;
  const clients = [];
  let receiver;
  let nc;
  let finished = false;
  log(`starting ${SERVICES.join(', ')} (own nats-server, broker, databases, Redis prefix)...`);
  const priv = await startPrivateFleet({ services: SERVICES, privateNats: true, logLevel: process.env.BENCH_LOG_LEVEL || 'warn' });
  const { fleet, id } = priv;
  ctx.onCleanup(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await receiver?.close();
    await nc?.close();
    await priv.cleanup({ keepLogs: !finished });
  });
  const partner = await gatewayAdmin(priv.gatewayDatabaseUrl, ['partner', 'create', '--name', `Bench events ${id}`, '--permissions', 'all', '--access-all-devices', '--requests-per-min', '100000000']);
  const { key } = await gatewayAdmin(priv.gatewayDatabaseUrl, ['key', 'issue', '--partner', partner.id]);
  const api = async (method, route, body) => {
    const res = await fetch(`${fleet.gatewayUrl}${route}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: await res.json().catch(() => ({})) };
  };

  receiver = await new WebhookReceiver().start();
  const hook = await api('POST', '/v1/webhooks', { url: receiver.url, event_types: ['device.connected', 'device.disconnected'] });
  if (hook.status !== 201) throw new Error(`POST /v1/webhooks answered ${hook.status}: ${JSON.stringify(hook.body)}`);
  receiver.trust(hook.body.secret);
  /** Deliveries by device, each resolving the waiter of that device's next one. */
  const waiting = new Map();
  receiver.onDelivery = (d) => {
    const deviceId = d.event.device_id;
    const waiter = waiting.get(deviceId);
    if (waiter && d.event.type === waiter.type) {
      waiting.delete(deviceId);
      waiter.resolve(performance.now());
    }
  };
  const nextDelivery = (deviceId, type) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${type} of ${deviceId} not delivered within ${DELIVERY_TIMEOUT_MS} ms`)), DELIVERY_TIMEOUT_MS);
      waiting.set(deviceId, { type, resolve: (at) => (clearTimeout(timer), resolve(at)) });
    });

  log(`provisioning ${DEVICE_COUNT} meters and connecting them...`);
  const ids = [];
  for (let i = 0; i < DEVICE_COUNT; i++) {
    const deviceId = `E${id.toUpperCase().slice(0, 5)}${i.toString(16).toUpperCase().padStart(6, '0')}`;
    const res = await api('POST', `/v1/devices/${deviceId}`, { product: 'meter', credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET });
    if (res.status !== 201) throw new Error(`provisioning ${deviceId} answered ${res.status}: ${JSON.stringify(res.body)}`);
    ids.push(deviceId);
  }
  const byDevice = new Map();
  await Promise.all(
    ids.map(async (deviceId) => {
      const client = await connectMeter(fleet.mqttUrl, deviceId);
      clients.push(client);
      byDevice.set(deviceId, client);
      const delivered = nextDelivery(deviceId, 'device.connected');
      await client.publishAsync(`meter/${deviceId}/status`, 'online', { qos: 1, retain: true });
      await delivered;
    }),
  );

  log(`${DEVICE_COUNT} meters × ${TOGGLES} toggles: PUBACK of each toggle → its signed delivery...`);
  const latency = histogram();
  const started = performance.now();
  await Promise.all(
    ids.map(async (deviceId) => {
      const client = byDevice.get(deviceId);
      for (let k = 0; k < TOGGLES; k++) {
        const online = k % 2 === 1;
        const delivered = nextDelivery(deviceId, online ? 'device.connected' : 'device.disconnected');
        await client.publishAsync(`meter/${deviceId}/status`, online ? 'online' : 'offline', { qos: 1, retain: true });
        const acked = performance.now();
        latency.record(Math.max(1, Math.round(((await delivered) - acked) * 1000)));
      }
    }),
  );
  const elapsedS = (performance.now() - started) / 1000;
  const events = DEVICE_COUNT * TOGGLES;

  log(`baseline: the same meters publish ${CAPTURE_MESSAGES} status messages each as fast as PUBACKs allow; DEVICE_IN's count...`);
  nc = await connect({ servers: fleet.natsUrl });
  const jsm = await nc.jetstreamManager();
  const stored = async () => (await jsm.streams.info('DEVICE_IN')).state.messages;
  // Toggles ended online (an even count) or offline: the baseline repeats the last state, so no event follows.
  const lastState = TOGGLES % 2 === 0 ? 'offline' : 'online';
  const before = await stored();
  const captureStart = performance.now();
  await Promise.all(ids.map(async (deviceId) => {
    for (let k = 0; k < CAPTURE_MESSAGES; k++) await byDevice.get(deviceId).publishAsync(`meter/${deviceId}/status`, lastState, { qos: 1, retain: true });
  }));
  const expected = before + DEVICE_COUNT * CAPTURE_MESSAGES;
  while ((await stored()) < expected && performance.now() - captureStart < 60_000) await new Promise((r) => setTimeout(r, 5));
  const captureS = (performance.now() - captureStart) / 1000;
  const captured = (await stored()) - before;

  const accepted = receiver.accepted();
  const unsigned = receiver.received.filter((d) => !d.verified).length;
  const ids2 = accepted.map((d) => d.event.id);
  const duplicates = ids2.length - new Set(ids2).size;
  const problems = [];
  if (unsigned) problems.push(`${unsigned} deliveries failed signature verification`);
  if (duplicates) problems.push(`${duplicates} events delivered twice`);
  if (captured < DEVICE_COUNT * CAPTURE_MESSAGES) problems.push(`the bridge stored ${captured} of ${DEVICE_COUNT * CAPTURE_MESSAGES} baseline messages`);
  const eventsPerS = events / elapsedS;
  const capturePerS = captured / captureS;
  finished = problems.length === 0;
  return {
    bench: 'events',
    title: "Push events: a device's message to its signed webhook delivery, beside the bridge's capture rate",
    settings: { devices: DEVICE_COUNT, toggles: TOGGLES, capture_messages: CAPTURE_MESSAGES },
    events_delivered: events,
    events_per_s: Math.round(eventsPerS),
    capture_per_s: Math.round(capturePerS),
    ratio: Math.round((eventsPerS / capturePerS) * 1000) / 1000,
    message_to_delivery_ms: summary(latency),
    pass: problems.length === 0,
    invalid: problems.length ? problems : undefined,
  };
}

function table(result) {
  const s = result.message_to_delivery_ms;
  return {
    head: ['measure', 'value'],
    rows: [
      ['events delivered (signed, verified)', String(result.events_delivered)],
      ['events/s, device message → delivery', String(result.events_per_s)],
      ['bridge capture/s (baseline)', String(result.capture_per_s)],
      ['ratio events/capture', result.ratio.toFixed(3)],
      ['PUBACK → delivery p50 / p90 / p99 / max ms', `${s.p50.toFixed(1)} / ${s.p90.toFixed(1)} / ${s.p99.toFixed(1)} / ${s.max.toFixed(1)}`],
    ],
    notes: [`${result.settings.devices} meters side by side, each waiting for its delivery before its next toggle (toggles closer than a connectivity batch would merge into one change)`],
  };
}

module.exports = {
  name: 'events',
  description: "push events: a meter's connectivity toggle → its signed webhook delivery (events/s as a ratio to the bridge's capture rate, p99 latency)",
  run,
  table,
};
