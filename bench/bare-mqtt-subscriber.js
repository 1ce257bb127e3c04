'use strict';
// The baseline of the `bridge` bench: a bare MQTT subscriber on the same broker as the bridge,
// doing nothing with a message but counting it. It runs in its own process, like the bridge,
// so both pay for their own event loop and the devices' process is the same for both.
//
// It connects like the bridge's traffic connection (MQTT 5, the admin credentials, Receive
// Maximum 1000, a QoS 1 subscription), but with a plain subscription and mqtt.js's own PUBACK
// as soon as the message was read. Settings come in BENCH_SUB (JSON: url, username, password,
// filter, receiveMaximum). Over IPC:
//   parent → { expect: { key, count } }  count messages whose last topic level is `key`
//   child  → { ready } once subscribed; { done, key, count, first_at, last_at, per_device }
//            once `count` such messages arrived; { progress, key, count } every second.
// Times are epoch milliseconds with sub-millisecond precision (performance.timeOrigin + now()).
const { performance } = require('node:perf_hooks');
const mqtt = require('mqtt');

const settings = JSON.parse(process.env.BENCH_SUB);
const now = () => performance.timeOrigin + performance.now();

/** Counters per last topic level (e.g. `warmup`, `bench`). */
const counters = new Map();
let expecting;

function counter(key) {
  let c = counters.get(key);
  if (!c) {
    c = { count: 0, first_at: null, last_at: null, perDevice: new Map() };
    counters.set(key, c);
  }
  return c;
}

const client = mqtt.connect(settings.url, {
  clientId: `bench-bare-sub-${process.pid}`,
  username: settings.username,
  password: settings.password,
  protocolVersion: 5,
  clean: true,
  keepalive: 60,
  reconnectPeriod: 0,
  properties: { receiveMaximum: settings.receiveMaximum ?? 1000 },
});

client.on('message', (topic) => {
  const at = now();
  const levels = topic.split('/');
  const c = counter(levels[levels.length - 1]);
  if (c.count === 0) c.first_at = at;
  c.count += 1;
  c.last_at = at;
  const device = levels[1];
  c.perDevice.set(device, (c.perDevice.get(device) ?? 0) + 1);
  if (expecting && levels[levels.length - 1] === expecting.key && c.count === expecting.count) finish();
});

function finish() {
  const { key } = expecting;
  const c = counter(key);
  expecting = undefined;
  process.send?.({ done: true, key, count: c.count, first_at: c.first_at, last_at: c.last_at, per_device: Object.fromEntries(c.perDevice) });
}

client.on('connect', () => {
  client.subscribe(settings.filter, { qos: 1 }, (err, granted) => {
    if (err || !granted?.length || granted[0].qos >= 128) {
      process.stderr.write(`subscribe refused: ${err?.message ?? JSON.stringify(granted)}\n`);
      process.exit(3);
    }
    process.send?.({ ready: true });
  });
});
client.on('error', (err) => process.stderr.write(`bare subscriber: ${err.message}\n`));
client.on('close', () => process.send?.({ closed: true }));

process.on('message', (msg) => {
  if (msg.expect) {
    counters.delete(msg.expect.key);
    expecting = msg.expect;
  }
});

const progress = setInterval(() => {
  if (expecting) process.send?.({ progress: true, key: expecting.key, count: counter(expecting.key).count });
}, 1000);

function shutdown() {
  clearInterval(progress);
  client.end(false, {}, () => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
process.on('disconnect', shutdown);
