'use strict';
// Device messages captured by mqtt-bridge into the JetStream stream DEVICE_IN, with N simulated
// devices connected at once, against a bare MQTT publish → subscribe on the same broker with the
// same devices, measured in the same run.
//
// Everything is private to the run: a nats-server (JetStream) and a Mosquitto with the
// dynamic-security plugin (its folder on tmpfs when there is one) on free ports, and one
// mqtt-bridge process (the built services/mqtt-bridge/dist) pointed at them. The devices are plain mqtt.js clients in
// this process, each with its own broker credential (username = client id = device id, the
// password derived from a root secret the way device-sim and the registry do).
const { spawn, fork, execFileSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const mqtt = require('mqtt');
const { connect: natsConnect, JSONCodec } = require('nats');
const { startNatsServer, startDynsecBroker, loadOrCreateAdminPassword, freePort, ROOT } = require('@fleet/launcher');
const { deriveBrokerPassword } = require('@fleet/device-protocol');
const { memoryOf, cpuTimeMs, ownCpuTimeMs, machineBusyMs } = require('../lib/proc');
const { PROFILE_NODE_OPTIONS } = require('../lib/cpuprofile');

const TARGET_RATIO = 0.5;
const ROOT_SECRET = 'Bench-Bridge-Sec';
const PRODUCT = 'light';
const PAYLOAD_BYTES = 100;
/** Messages per device before each measured run (discarded): connections, JIT and streams warm. */
const WARMUP_PER_DEVICE = 2;
/** A run that makes no progress for this long is abandoned (loss or a stuck component). */
const STALL_MS = 20_000;
const BRIDGE_MAIN = path.join(ROOT, 'services', 'mqtt-bridge', 'dist', 'main.js');
const DEVICE_IN = 'DEVICE_IN';
const DEVICE_EVENTS = 'DEVICE_EVENTS';
const codec = JSONCodec();

const epochNow = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const round = (x, digits = 0) => Math.round(x * 10 ** digits) / 10 ** digits;

/** The device's broker password, derived as the device protocol says. */
function brokerPassword(deviceId) {
  return deriveBrokerPassword(ROOT_SECRET, deviceId, PRODUCT);
}

function writable(dir) {
  try {
    fs.accessSync(dir, fs.constants.W_OK);
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

// ---- the bridge process -----------------------------------------------------------------------

function buildBridgeIfMissing(log) {
  if (fs.existsSync(BRIDGE_MAIN)) return;
  log('services/mqtt-bridge/dist is missing: building it (and what it depends on)...');
  execFileSync('npx', ['pnpm@10.34.8', '--filter', '@fleet/mqtt-bridge...', 'run', 'build'], { cwd: ROOT, stdio: 'inherit' });
}

/**
 * Starts one mqtt-bridge process and resolves once /readyz answers 200 (NATS, both MQTT
 * connections and the shared subscriptions up). Resolves with { pid, stop }.
 */
/**
 * Ends the bridge's backstop session (see services/mqtt-bridge/README.md). While no replica
 * runs it queues every device message, and the next bridge would capture them: what the
 * devices send in a baseline run would count as duplicates of the bridge run.
 */
async function forgetBackstopSession(broker, group) {
  const client = await mqtt.connectAsync(broker.url, {
    clientId: `${group}-backstop`,
    username: broker.adminUsername,
    password: broker.adminPassword,
    protocolVersion: 5,
    clean: true,
    reconnectPeriod: 0,
    properties: { sessionExpiryInterval: 0 },
  });
  await client.endAsync();
}

async function startBridge({ env, logFile, nodeOptions }) {
  const healthPort = await freePort();
  const childEnv = { ...process.env, ...env, HEALTH_PORT: String(healthPort) };
  delete childEnv.NODE_OPTIONS;
  if (nodeOptions) childEnv.NODE_OPTIONS = nodeOptions;
  const out = fs.openSync(logFile, 'a');
  const child = spawn(process.execPath, [BRIDGE_MAIN], { env: childEnv, stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.kill('SIGTERM');
    await exited;
    clearTimeout(kill);
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`mqtt-bridge exited during start (code ${child.exitCode}); see ${logFile}`);
    try {
      const res = await fetch(`http://127.0.0.1:${healthPort}/readyz`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`mqtt-bridge not ready within 30 s; see ${logFile}`);
    }
    await sleep(100);
  }
  return { pid: child.pid, stop };
}

// ---- provisioning -----------------------------------------------------------------------------

/**
 * bridge.credential.upsert for every device, as the registry asks it (request envelope, one
 * request per device), `concurrency` in flight. A refused or timed-out request is tried again
 * (up to 3 times); the count of retries is reported.
 */
async function provisionByUpsert(nc, devices, { concurrency, log }) {
  const t0 = performance.now();
  let next = 0;
  let done = 0;
  let retries = 0;
  const progressEvery = Math.max(1, Math.floor(devices.length / 10));
  const samples = [];
  const upsert = async (device) => {
    for (let attempt = 1; ; attempt++) {
      const envelope = { request_id: crypto.randomUUID(), params: {}, query: {}, body: { device_id: device.id, product: PRODUCT, password: device.password } };
      try {
        const reply = codec.decode((await nc.request('bridge.credential.upsert', codec.encode(envelope), { timeout: 60_000 })).data);
        if (reply.ok) return;
        if (attempt >= 3) throw new Error(`bridge.credential.upsert ${device.id}: ${JSON.stringify(reply.error)}`);
      } catch (err) {
        if (attempt >= 3) throw err;
      }
      retries += 1;
      await sleep(200 * attempt);
    }
  };
  const worker = async () => {
    for (;;) {
      const device = devices[next++];
      if (!device) return;
      await upsert(device);
      done += 1;
      if (done % progressEvery === 0) {
        const elapsed = (performance.now() - t0) / 1000;
        samples.push({ devices: done, elapsed_s: round(elapsed, 2) });
        log(`  ${done}/${devices.length} credentials (${(done / elapsed).toFixed(0)}/s so far)`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, devices.length) }, worker));
  const seconds = (performance.now() - t0) / 1000;
  return { method: 'upsert', concurrency, seconds, per_s: devices.length / seconds, retries, progress: samples };
}

/**
 * The other way (BENCH_BRIDGE_PROVISION=seed): writes every device's client and role into the
 * plugin file before the broker starts, exactly as bridge.credential.upsert leaves them
 * (username = client id = device id, PBKDF2-SHA512 password hash with 101 iterations and a
 * 12-byte salt, role device-<id> with the four ACLs on <root>/<id>/#). The broker loads the
 * file once at start instead of rewriting it twice per device. One upsert afterwards
 * (provisionCheck) confirms the bridge finds the role as it would have made it.
 */
function seedDynsecFile(file, devices) {
  const t0 = performance.now();
  const config = JSON.parse(fs.readFileSync(file, 'utf8'));
  for (const device of devices) {
    const salt = crypto.randomBytes(12);
    const hash = crypto.pbkdf2Sync(device.password, salt, 101, 64, 'sha512');
    const rolename = `device-${device.id}`;
    const topic = `${PRODUCT}/${device.id}/#`;
    config.roles.push({ rolename, acls: ['publishClientSend', 'publishClientReceive', 'subscribePattern', 'unsubscribePattern'].map((acltype) => ({ acltype, topic, priority: 0, allow: true })) });
    config.clients.push({ username: device.id, clientid: device.id, roles: [{ rolename }], password: hash.toString('base64'), salt: salt.toString('base64'), iterations: 101 });
  }
  fs.writeFileSync(file, JSON.stringify(config, null, '\t'), { mode: 0o600 });
  return (performance.now() - t0) / 1000;
}

// ---- the devices ------------------------------------------------------------------------------

/**
 * Connects every device at once (all CONNECTs started together). Resolves with the clients
 * and the time until the last CONNACK; rejects if any device is refused or times out.
 */
async function connectDevices(devices, brokerUrl) {
  const t0 = performance.now();
  const stats = { disconnects: 0 };
  const clients = await Promise.all(
    devices.map(
      (device) =>
        new Promise((resolve, reject) => {
          const client = mqtt.connect(brokerUrl, {
            clientId: device.id,
            username: device.id,
            password: device.password,
            protocolVersion: 4,
            clean: true,
            keepalive: 60,
            connectTimeout: 60_000,
            reconnectPeriod: 0,
          });
          const fail = (err) => {
            client.end(true);
            reject(new Error(`device ${device.id} could not connect: ${err.message}`));
          };
          client.once('error', fail);
          client.once('connect', () => {
            client.removeListener('error', fail);
            client.on('error', () => undefined);
            client.on('close', () => {
              stats.disconnects += 1;
            });
            resolve(client);
          });
        }),
    ),
  );
  return { clients, seconds: (performance.now() - t0) / 1000, stats };
}

/** ~100 bytes of JSON telemetry, unique per device and sequence. */
function payloadFor(deviceId, seq) {
  const head = `{"id":"${deviceId}","seq":${seq},"t":${Date.now()},"pad":"`;
  return Buffer.from(`${head}${'x'.repeat(Math.max(0, PAYLOAD_BYTES - head.length - 2))}"}`);
}

/**
 * Every device publishes `perDevice` QoS 1 messages on `<root>/<id>/tele/<key>` as fast as the
 * broker acknowledges them, each keeping up to `window` unacknowledged. Resolves when every
 * PUBACK came: { at (epoch ms of the last PUBACK), errors }.
 */
function publishAll(clients, devices, { key, perDevice, window }) {
  return new Promise((resolve) => {
    let remaining = clients.length;
    let errors = 0;
    const finishOne = () => {
      remaining -= 1;
      if (remaining === 0) resolve({ at: epochNow(), errors });
    };
    clients.forEach((client, i) => {
      const { id } = devices[i];
      const topic = `${PRODUCT}/${id}/tele/${key}`;
      let sent = 0;
      let acked = 0;
      const pump = () => {
        while (sent < perDevice && sent - acked < window) {
          const seq = sent++;
          client.publish(topic, payloadFor(id, seq), { qos: 1 }, (err) => {
            if (err) errors += 1;
            acked += 1;
            if (acked === perDevice) finishOne();
            else pump();
          });
        }
      };
      pump();
    });
  });
}

// ---- measuring ----------------------------------------------------------------------------------

/** CPU time so far (ms) of every process that takes part, and of the whole machine. */
function cpuReader(pids) {
  return () => {
    const out = { devices: ownCpuTimeMs(), machine: machineBusyMs() };
    for (const [name, pid] of Object.entries(pids)) out[name] = pid ? cpuTimeMs(pid) : 0;
    return out;
  };
}

function cpuSummary(before, after, messages, seconds) {
  const ms = Object.fromEntries(Object.keys(after).map((k) => [k, Math.round(after[k] - before[k])]));
  const perMessage = Object.fromEntries(Object.keys(ms).filter((k) => k !== 'machine').map((k) => [k, round((ms[k] * 1000) / messages, 1)]));
  const named = Object.keys(ms).filter((k) => k !== 'machine').reduce((a, k) => a + ms[k], 0);
  return { cpu_ms: ms, cpu_us_per_message: perMessage, machine_cores: round(ms.machine / (seconds * 1000), 2), rest_of_machine_cores: round((ms.machine - named) / (seconds * 1000), 2) };
}

/** Messages in the stream now, and the time the last one was stored (epoch ms). */
async function streamState(jsm) {
  const info = await jsm.streams.info(DEVICE_IN);
  return { messages: info.state.messages, lastAt: Date.parse(info.state.last_ts) };
}

/** Polls DEVICE_IN until it holds `target` messages; stalls (no growth for STALL_MS) reject. */
async function waitForStream(jsm, target) {
  let last = -1;
  let lastChange = Date.now();
  for (;;) {
    const state = await streamState(jsm);
    if (state.messages >= target) return state;
    if (state.messages !== last) {
      last = state.messages;
      lastChange = Date.now();
    } else if (Date.now() - lastChange > STALL_MS) {
      throw Object.assign(new Error(`DEVICE_IN stopped at ${state.messages} of ${target} messages`), { state });
    }
    await sleep(25);
  }
}

/** Per-subject counts of the stream for one message key: { devices, min, max, total, wrong }. */
async function perDeviceCounts(jsm, key, deviceIds, expected) {
  const info = await jsm.streams.info(DEVICE_IN, { subjects_filter: `dev.in.${PRODUCT}.*.tele.${key}` });
  const counts = info.state.subjects ?? {};
  let total = 0;
  const wrong = [];
  for (const id of deviceIds) {
    const n = counts[`dev.in.${PRODUCT}.${id}.tele.${key}`] ?? 0;
    total += n;
    if (n !== expected && wrong.length < 10) wrong.push(`${id}: ${n}`);
  }
  const values = deviceIds.map((id) => counts[`dev.in.${PRODUCT}.${id}.tele.${key}`] ?? 0);
  return { total, min: Math.min(...values), max: Math.max(...values), wrong };
}

/**
 * Forks bench/bare-mqtt-subscriber.js subscribed to `filter`; resolves once subscribed with
 * { pid, expect(key, count, onProgress) → Promise<done message>, stop }.
 */
async function startBareSubscriber({ broker, filter, logFile }) {
  const env = { ...process.env, BENCH_SUB: JSON.stringify({ url: broker.url, username: broker.adminUsername, password: broker.adminPassword, filter, receiveMaximum: 1000 }) };
  delete env.NODE_OPTIONS;
  const out = fs.openSync(logFile, 'a');
  const child = fork(path.join(__dirname, '..', 'bare-mqtt-subscriber.js'), [], { env, stdio: ['ignore', out, out, 'ipc'] });
  fs.closeSync(out);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let earlyExit;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('bare subscriber not subscribed within 10 s')), 10_000);
    earlyExit = (code) => reject(new Error(`bare subscriber exited (code ${code}); see ${logFile}`));
    child.once('exit', earlyExit);
    child.on('message', (m) => {
      if (m.ready) {
        clearTimeout(timer);
        resolve();
      }
    });
  }).catch(async (err) => {
    child.kill('SIGKILL');
    throw err;
  });
  child.off('exit', earlyExit);
  return {
    pid: child.pid,
    expect: (key, count) =>
      new Promise((resolve, reject) => {
        let last = -1;
        let lastChange = Date.now();
        const onMessage = (m) => {
          if (m.done && m.key === key) {
            child.off('message', onMessage);
            clearInterval(watch);
            resolve(m);
          } else if (m.progress && m.count !== last) {
            last = m.count;
            lastChange = Date.now();
          } else if (m.closed) {
            child.off('message', onMessage);
            clearInterval(watch);
            reject(new Error('the bare subscriber lost its broker connection'));
          }
        };
        const watch = setInterval(() => {
          if (Date.now() - lastChange > STALL_MS) {
            child.off('message', onMessage);
            clearInterval(watch);
            reject(new Error(`the bare subscriber stopped at ${last} of ${count} messages`));
          }
        }, 1000);
        child.on('message', onMessage);
        child.send({ expect: { key, count } });
      }),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
      child.kill('SIGTERM');
      await exited;
      clearTimeout(kill);
    },
  };
}

/** Warnings and errors in the bridge's log (pino JSON lines), counted by message. */
function bridgeLogSummary(logFile) {
  const counts = {};
  let text = '';
  try {
    text = fs.readFileSync(logFile, 'utf8');
  } catch {
    return counts;
  }
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line);
      if (entry.level >= 40) counts[entry.msg] = (counts[entry.msg] ?? 0) + 1;
    } catch {
      // not a log line
    }
  }
  return counts;
}

// ---- the bench ----------------------------------------------------------------------------------

async function run(ctx) {
  const { rounds = 1, profileDir, log } = ctx;
  const deviceCount = Math.floor(ctx.devices ?? 2000);
  const perDevice = Math.floor(ctx.messages ?? 50);
  const window = Math.max(1, Math.floor(Number(process.env.BENCH_BRIDGE_INFLIGHT || 10)));
  const provisionConcurrency = Math.max(1, Math.floor(Number(process.env.BENCH_BRIDGE_PROVISION_CONCURRENCY || 32)));
  const logLevel = process.env.BENCH_LOG_LEVEL || 'warn';
  // BENCH_BRIDGE_PROVISION: upsert (default: bridge.credential.upsert per device, as the registry
  // does) or seed (the plugin file written before the broker starts; see seedDynsecFile).
  const provisionMethod = process.env.BENCH_BRIDGE_PROVISION || 'upsert';
  if (!['upsert', 'seed'].includes(provisionMethod)) throw new Error('BENCH_BRIDGE_PROVISION must be upsert or seed');
  const total = deviceCount * perDevice;
  if (deviceCount < 1 || perDevice < 1) throw new Error('--devices and --messages must be at least 1');
  if (profileDir) fs.mkdirSync(profileDir, { recursive: true });
  buildBridgeIfMissing(log);

  const id = crypto.randomBytes(4).toString('hex');
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), `fleet-bench-bridge-${id}-`));
  const logDir = path.join(workDir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  // Device ids: 12 uppercase hex, a random 4-hex prefix of the run then the index.
  const prefix = id.slice(0, 4).toUpperCase();
  const devices = Array.from({ length: deviceCount }, (_, i) => {
    const deviceId = `${prefix}${i.toString(16).toUpperCase().padStart(8, '0')}`;
    return { id: deviceId, password: brokerPassword(deviceId) };
  });

  let nats;
  let mqttDir;
  let broker;
  let bridge;
  let subscriber;
  let nc;
  let clients = [];
  let finished = false;
  let cleaned;
  const cleanup = () => {
    cleaned ??= (async () => {
      for (const c of clients) c.end(true);
      if (subscriber) await subscriber.stop().catch(() => undefined);
      if (bridge) await bridge.stop().catch(() => undefined);
      if (nc) {
        // The private server goes with its folder; the streams are removed first all the same.
        const jsm = await nc.jetstreamManager().catch(() => undefined);
        for (const s of [DEVICE_IN, DEVICE_EVENTS]) await jsm?.streams.delete(s).catch(() => undefined);
        await nc.close().catch(() => undefined);
      }
      if (broker) await broker.stop().catch(() => undefined);
      if (nats) await nats.stop().catch(() => undefined);
      if (finished && !process.env.BENCH_KEEP_LOGS) {
        fs.rmSync(workDir, { recursive: true, force: true });
        if (mqttDir) fs.rmSync(mqttDir, { recursive: true, force: true });
      } else process.stderr.write(`bench logs kept in ${workDir}${mqttDir && !mqttDir.startsWith(workDir) ? ` and ${mqttDir}` : ''}\n`);
    })();
    return cleaned;
  };
  ctx.onCleanup(cleanup);

  try {
    log(`starting a private nats-server and a Mosquitto with dynamic security (${workDir})...`);
    nats = await startNatsServer({ storeDir: path.join(workDir, 'nats') });
    // The broker's folder goes on tmpfs (/dev/shm) when there is one: the plugin rewrites its
    // whole file (about 0.8 KB per device) twice per upsert, which is most of the provisioning
    // time. Nothing in the measured runs writes there. BENCH_BRIDGE_BROKER_DIR picks another place.
    const brokerParent = process.env.BENCH_BRIDGE_BROKER_DIR ?? (writable('/dev/shm') ? '/dev/shm' : undefined);
    mqttDir = brokerParent ? fs.mkdtempSync(path.join(brokerParent, `fleet-bench-bridge-${id}-`)) : path.join(workDir, 'mosquitto');
    const adminPassword = loadOrCreateAdminPassword(mqttDir);
    let seedSeconds;
    if (provisionMethod === 'seed') {
      log(`writing ${deviceCount} device credentials into the plugin file before the broker starts...`);
      const file = path.join(mqttDir, 'dynamic-security.json');
      execFileSync('mosquitto_ctrl', ['dynsec', 'init', file, 'fleet-admin', adminPassword], { stdio: 'ignore' });
      // The first device is left out: the bridge makes it, and the seeded ones must look the same.
      seedSeconds = seedDynsecFile(file, devices.slice(1));
    }
    const brokerStarted = performance.now();
    broker = await startDynsecBroker({ dataDir: mqttDir, adminPassword });
    const brokerStartSeconds = (performance.now() - brokerStarted) / 1000;
    const bridgeEnv = {
      NATS_URL: nats.url,
      MQTT_URL: broker.url,
      MQTT_ADMIN_USERNAME: broker.adminUsername,
      MQTT_ADMIN_PASSWORD: broker.adminPassword,
      SERVICE_INSTANCE: `bench-${id}`,
      LOG_LEVEL: logLevel,
      DEVICE_IN_STREAM: DEVICE_IN,
      DEVICE_EVENTS_STREAM: DEVICE_EVENTS,
    };
    let bridgeStarts = 0;
    let bridgeLog;
    const launchBridge = async ({ profile }) => {
      bridgeStarts += 1;
      const nodeOptions = [profile && profileDir ? PROFILE_NODE_OPTIONS : undefined, process.env.BENCH_BRIDGE_NODE_OPTIONS].filter(Boolean).join(' ');
      bridgeLog = path.join(logDir, `mqtt-bridge-${bridgeStarts}.log`);
      bridge = await startBridge({ env: bridgeEnv, logFile: bridgeLog, nodeOptions: nodeOptions || undefined });
      return bridge;
    };
    const stopBridge = async () => {
      await bridge.stop();
      bridge = undefined;
      await forgetBackstopSession(broker, 'fleet-bridge');
    };

    log('starting mqtt-bridge...');
    await launchBridge({ profile: false });
    nc = await natsConnect({ servers: nats.url, name: 'bench-bridge' });
    const jsm = await nc.jetstreamManager();

    let provisioning;
    if (provisionMethod === 'seed') {
      // The seeded role must be what the bridge makes: an upsert of a seeded device finds it equal.
      const check = await provisionByUpsert(nc, devices.slice(0, 1), { concurrency: 1, log: () => undefined });
      const plugin = JSON.parse(fs.readFileSync(path.join(mqttDir, 'dynamic-security.json'), 'utf8'));
      // Role and client of a device with its id blanked out; the client without its hash and salt.
      const shape = (device) => {
        const role = plugin.roles.find((r) => r.rolename === `device-${device.id}`);
        const { password, salt, ...client } = plugin.clients.find((c) => c.username === device.id) ?? {};
        return JSON.stringify({ role, client, hash: [password?.length, salt?.length] }).replaceAll(device.id, '<id>');
      };
      if (shape(devices[0]) !== shape(devices[1])) throw new Error(`a seeded credential differs from the one bridge.credential.upsert made: ${shape(devices[1])} vs ${shape(devices[0])}`);
      provisioning = { method: 'seed', seconds: seedSeconds + brokerStartSeconds, per_s: deviceCount / (seedSeconds + brokerStartSeconds), seed_s: round(seedSeconds, 3), broker_start_s: round(brokerStartSeconds, 3), check_upsert_s: round(check.seconds, 3), retries: check.retries };
    } else {
      log(`provisioning ${deviceCount} device credentials through bridge.credential.upsert (${provisionConcurrency} in flight)...`);
      provisioning = await provisionByUpsert(nc, devices, { concurrency: provisionConcurrency, log });
    }
    const dynsecBytes = fs.statSync(path.join(mqttDir, 'dynamic-security.json')).size;
    log(`provisioned in ${provisioning.seconds.toFixed(1)} s (${provisioning.per_s.toFixed(0)}/s); the plugin file is ${(dynsecBytes / 1048576).toFixed(1)} MB`);

    log(`connecting ${deviceCount} devices at once...`);
    const connected = await connectDevices(devices, broker.url);
    clients = connected.clients;
    log(`connected in ${connected.seconds.toFixed(2)} s`);
    const bridgeMemory = [];

    // ---- one baseline run: the bridge is stopped (it left the share group); a bare subscriber
    // takes <root>/+/tele/+ from the same devices on the same broker.
    const baselineRun = async (label) => {
      subscriber = await startBareSubscriber({ broker, filter: `${PRODUCT}/+/tele/+`, logFile: path.join(logDir, 'bare-subscriber.log') });
      try {
        const warm = subscriber.expect('warmup', deviceCount * WARMUP_PER_DEVICE);
        await publishAll(clients, devices, { key: 'warmup', perDevice: WARMUP_PER_DEVICE, window });
        await warm;
        const readCpu = cpuReader({ mosquitto: broker.pid, receiver: subscriber.pid, nats_server: nats.pid });
        const disconnectsBefore = connected.stats.disconnects;
        const delivered = subscriber.expect('bench', total);
        const before = readCpu();
        const t0 = epochNow();
        const published = await publishAll(clients, devices, { key: 'bench', perDevice, window });
        const done = await delivered;
        const after = readCpu();
        const seconds = (done.last_at - t0) / 1000;
        const counts = Object.values(done.per_device);
        const wrong = devices.filter((d) => done.per_device[d.id] !== perDevice).slice(0, 10).map((d) => `${d.id}: ${done.per_device[d.id] ?? 0}`);
        return {
          label,
          messages: done.count,
          seconds: round(seconds, 3),
          msgs_per_s: round(total / seconds),
          // How fast the broker took the messages from the devices (all PUBACKs at the devices).
          publish_seconds: round((published.at - t0) / 1000, 3),
          publish_msgs_per_s: round(total / ((published.at - t0) / 1000)),
          publish_errors: published.errors,
          disconnects: connected.stats.disconnects - disconnectsBefore,
          verified: { devices_with_messages: counts.length, wrong: wrong.length ? wrong : undefined },
          ...cpuSummary(before, after, total, seconds),
        };
      } finally {
        await subscriber.stop();
        subscriber = undefined;
      }
    };

    // ---- one product run: the bridge takes <root>/+/# through its shared subscription and
    // stores every message in DEVICE_IN; the run ends when the last one is stored.
    let productRuns = 0;
    const productRun = async (label) => {
      productRuns += 1;
      await launchBridge({ profile: true });
      try {
        const start = await streamState(jsm);
        await publishAll(clients, devices, { key: 'warmup', perDevice: WARMUP_PER_DEVICE, window });
        const warmed = await waitForStream(jsm, start.messages + deviceCount * WARMUP_PER_DEVICE);
        const readCpu = cpuReader({ mosquitto: broker.pid, receiver: bridge.pid, nats_server: nats.pid });
        const disconnectsBefore = connected.stats.disconnects;
        const before = readCpu();
        const t0 = epochNow();
        const published = await publishAll(clients, devices, { key: 'bench', perDevice, window });
        const stored = await waitForStream(jsm, warmed.messages + total);
        const after = readCpu();
        const seconds = (stored.lastAt - t0) / 1000;
        bridgeMemory.push(memoryOf(bridge.pid));
        const warnings = bridgeLogSummary(bridgeLog);
        // Exactly perDevice × runs so far for every device (no loss, no duplicates), after a pause
        // long enough for late duplicates to show.
        await sleep(500);
        const check = await perDeviceCounts(jsm, 'bench', devices.map((d) => d.id), perDevice * productRuns);
        const extra = (await streamState(jsm)).messages - (warmed.messages + total);
        return {
          label,
          messages: stored.messages - warmed.messages,
          seconds: round(seconds, 3),
          msgs_per_s: round(total / seconds),
          publish_seconds: round((published.at - t0) / 1000, 3),
          publish_msgs_per_s: round(total / ((published.at - t0) / 1000)),
          publish_errors: published.errors,
          disconnects: connected.stats.disconnects - disconnectsBefore,
          bridge_log_warnings: Object.keys(warnings).length ? warnings : undefined,
          verified: { stored_after_end: extra, per_device_min: check.min, per_device_max: check.max, per_device_expected: perDevice * productRuns, wrong: check.wrong.length ? check.wrong : undefined },
          ...cpuSummary(before, after, total, seconds),
        };
      } finally {
        await stopBridge();
      }
    };

    await stopBridge();
    const step = `${deviceCount} devices x ${perDevice} messages = ${total}, QoS 1, ${window} in flight per device`;
    const baselineRuns = [];
    const bridgeRuns = [];
    log(`bare publish -> subscribe, run 1 (${step})...`);
    baselineRuns.push(await baselineRun('bare pub->sub (1)'));
    for (let r = 1; r <= rounds; r++) {
      const n = rounds > 1 ? ` (${r})` : '';
      log(`devices -> bridge -> DEVICE_IN${n} (${step})...`);
      bridgeRuns.push(await productRun(`bridge -> DEVICE_IN${n}`));
      log(`bare publish -> subscribe, run ${r + 1} (${step})...`);
      baselineRuns.push(await baselineRun(`bare pub->sub (${r + 1})`));
    }

    const roundRatios = bridgeRuns.map((b, i) => b.msgs_per_s / mean([baselineRuns[i].msgs_per_s, baselineRuns[i + 1].msgs_per_s]));
    const ratio = mean(roundRatios);
    const baseRates = baselineRuns.map((r) => r.msgs_per_s);
    const baseMean = mean(baseRates);
    const problems = [];
    for (const r of [...baselineRuns, ...bridgeRuns]) {
      if (r.messages !== total) problems.push(`${r.label}: ${r.messages} of ${total} messages arrived`);
      if (r.verified.wrong) problems.push(`${r.label}: devices with the wrong count: ${r.verified.wrong.join(', ')}`);
      if (r.verified.stored_after_end) problems.push(`${r.label}: ${r.verified.stored_after_end} messages more than sent (duplicates)`);
      if (r.publish_errors) problems.push(`${r.label}: ${r.publish_errors} publishes failed`);
      if (r.disconnects) problems.push(`${r.label}: ${r.disconnects} devices disconnected`);
    }
    const meanCpu = (runs, name) => round(mean(runs.map((r) => r.cpu_us_per_message[name])), 1);
    const cpuPerMessage = Object.fromEntries(['devices', 'mosquitto', 'receiver', 'nats_server'].map((name) => [name, { bare: meanCpu(baselineRuns, name), bridge: meanCpu(bridgeRuns, name) }]));
    // CPU of every process on the path, per message: on a machine whose cores are all busy this
    // bounds msgs/s, and it moves much less than msgs/s when other work shares the machine.
    const pathCpu = (side) => round(Object.values(cpuPerMessage).reduce((a, v) => a + v[side], 0), 1);
    cpuPerMessage.path = { bare: pathCpu('bare'), bridge: pathCpu('bridge') };
    cpuPerMessage.receiver_ratio_bare_to_bridge = round(cpuPerMessage.receiver.bare / cpuPerMessage.receiver.bridge, 3);
    cpuPerMessage.path_ratio_bare_to_bridge = round(cpuPerMessage.path.bare / cpuPerMessage.path.bridge, 3);
    // Logs stay for a look when the numbers are not valid (see the message at the end).
    finished = problems.length === 0;
    return {
      bench: 'bridge',
      title: `Device messages captured into ${DEVICE_IN} by mqtt-bridge vs a bare MQTT publish -> subscribe, ${deviceCount} devices connected at once`,
      settings: {
        devices: deviceCount,
        messages_per_device: perDevice,
        messages_per_run: total,
        payload_bytes: PAYLOAD_BYTES,
        qos: 1,
        in_flight_per_device: window,
        warmup_messages_per_device: WARMUP_PER_DEVICE,
        rounds,
        order: ['bare', ...bridgeRuns.flatMap(() => ['bridge', 'bare'])],
        bridge_log_level: logLevel,
        bridge_cpu_profile: Boolean(profileDir),
        bridge_node_options: process.env.BENCH_BRIDGE_NODE_OPTIONS || undefined,
        bridge_starts: bridgeStarts,
        mosquitto: 'max_inflight_messages 1000, max_queued_messages 1000000 (packages/launcher/src/mosquitto.js)',
      },
      provisioning: { ...provisioning, devices: deviceCount, dynsec_file_bytes: dynsecBytes, broker_dir: brokerParent ?? os.tmpdir() },
      connect: { devices: deviceCount, seconds: round(connected.seconds, 3), per_s: round(deviceCount / connected.seconds) },
      runs: { bare: baselineRuns, bridge: bridgeRuns },
      bridge_mean_msgs_per_s: round(mean(bridgeRuns.map((r) => r.msgs_per_s))),
      bare_mean_msgs_per_s: round(baseMean),
      bare_drift_pct: round(((baseRates.at(-1) - baseRates[0]) / baseRates[0]) * 100, 1),
      bare_spread_pct: round(((Math.max(...baseRates) - Math.min(...baseRates)) / baseMean) * 100, 1),
      round_ratios: roundRatios.map((r) => round(r, 3)),
      ratio: round(ratio, 3),
      target: TARGET_RATIO,
      pass: problems.length === 0 && ratio >= TARGET_RATIO,
      cpu_us_per_message: cpuPerMessage,
      memory: {
        bridge_rss_bytes: bridgeMemory.at(-1)?.rss,
        bridge_peak_rss_bytes: Math.max(...bridgeMemory.map((m) => m.peakRss)),
        devices_process_rss_bytes: process.memoryUsage().rss,
        mosquitto_rss_bytes: memoryOf(broker.pid).rss,
      },
      invalid: problems.length ? problems : undefined,
      profile_dir: profileDir,
    };
  } finally {
    await cleanup();
  }
}

/** Rows for the printed table. */
function table(result) {
  const mb = (b) => `${(b / 1048576).toFixed(1)} MB`;
  const row = (r) => [
    r.label,
    r.msgs_per_s.toFixed(0),
    r.seconds.toFixed(2),
    String(r.messages),
    r.publish_msgs_per_s.toFixed(0),
    String(r.cpu_us_per_message.receiver),
    String(r.cpu_us_per_message.mosquitto),
    String(r.cpu_us_per_message.nats_server),
    String(r.cpu_us_per_message.devices),
    r.rest_of_machine_cores.toFixed(2),
  ];
  const p = result.provisioning;
  return {
    head: ['run', 'msgs/s', 'seconds', 'messages', 'broker took/s', 'receiver us/msg', 'mosquitto us/msg', 'nats us/msg', 'devices us/msg', 'rest of machine (cores)'],
    rows: result.runs.bare.flatMap((b, i) => [row(b), ...(result.runs.bridge[i] ? [row(result.runs.bridge[i])] : [])]),
    notes: [
      `${result.settings.devices} devices, ${result.settings.messages_per_device} messages each (${result.settings.messages_per_run} per run, ${result.settings.payload_bytes} B, QoS 1, ${result.settings.in_flight_per_device} in flight per device); receiver = the bare subscriber or mqtt-bridge`,
      p.method === 'seed'
        ? `provisioning: ${p.devices} credentials written into the plugin file before the broker started, ${p.seconds.toFixed(2)} s (file ${p.seed_s.toFixed(2)} s + broker start ${p.broker_start_s.toFixed(2)} s; one check upsert ${p.check_upsert_s.toFixed(3)} s; file ${mb(p.dynsec_file_bytes)}) - not in the ratio`
        : `provisioning: ${p.devices} credentials through bridge.credential.upsert in ${p.seconds.toFixed(1)} s (${p.per_s.toFixed(0)}/s, ${p.concurrency} in flight, ${p.retries} retries; plugin file ${mb(p.dynsec_file_bytes)}) - not in the ratio`,
      `connect: ${result.connect.devices} devices at once in ${result.connect.seconds.toFixed(2)} s`,
      `bare mean ${result.bare_mean_msgs_per_s.toFixed(0)} msgs/s (drift first -> last bare run: ${result.bare_drift_pct >= 0 ? '+' : ''}${result.bare_drift_pct.toFixed(1)}%)`,
      `ratio bridge/bare = ${result.ratio.toFixed(3)}${result.round_ratios.length > 1 ? ` (rounds: ${result.round_ratios.map((r) => r.toFixed(3)).join(', ')})` : ''}   target >= ${result.target}   ${result.invalid ? 'INVALID (messages lost, duplicated or devices dropped)' : result.pass ? 'PASS' : 'FAIL'}`,
      `CPU per message: mqtt-bridge ${result.cpu_us_per_message.receiver.bridge} us vs bare subscriber ${result.cpu_us_per_message.receiver.bare} us (bare/bridge ${result.cpu_us_per_message.receiver_ratio_bare_to_bridge}); whole path (devices + mosquitto + receiver + nats-server) ${result.cpu_us_per_message.path.bridge} us vs ${result.cpu_us_per_message.path.bare} us (bare/bridge ${result.cpu_us_per_message.path_ratio_bare_to_bridge})`,
      `memory: mqtt-bridge RSS ${mb(result.memory.bridge_rss_bytes)} after the run (peak ${mb(result.memory.bridge_peak_rss_bytes)}), mosquitto ${mb(result.memory.mosquitto_rss_bytes)}, devices process ${mb(result.memory.devices_process_rss_bytes)}`,
    ],
  };
}

module.exports = {
  name: 'bridge',
  description: 'device messages captured into DEVICE_IN by mqtt-bridge, 2,000 devices at once, vs bare MQTT pub->sub (target ratio >= 0.5)',
  run,
  table,
};
