'use strict';
// Light commands through the whole fleet: POST /v1/devices/{id}/commands on the gateway →
// light-command → mqtt-bridge → Mosquitto → connected simulated lights. Reports the command rate
// and the latency from sending the HTTP request to the light receiving the payload (p50/p99),
// beside a bare MQTT publish → subscribe (QoS 1, the same broker, the same lights) measured in
// the same run with the same concurrency; then both again one command at a time (sequential).
// Also the CPU each process spends per command in the fleet's concurrent run and in the first bare run.
// --profile: V8 CPU profiles of the fleet's services, summarised at the end.
const crypto = require('node:crypto');
const path = require('node:path');
const { createHistogram, performance } = require('node:perf_hooks');
const { ROOT } = require('@fleet/launcher');
const { gatewayAdmin, redisCpuReader, startPrivateFleet } = require('../lib/fleet-setup');
const { leanHttpClient } = require('../lib/lean-http');
const { cpuTimesOf, machineBusyMs } = require('../lib/proc');

const SERVICES = ['device-registry', 'light-command', 'mqtt-bridge', 'gateway'];
const SECRET = 'Bench-Light-Sec!';
/** BENCH_LIGHTS: how many simulated lights receive commands (default 20). */
const LIGHT_COUNT = Number(process.env.BENCH_LIGHTS || 20);
/** Targets of the issue: concurrent rate at least 0.3 of bare MQTT's; sequential to-device p50 and p99. */
const TARGET_RATE_RATIO = 0.3;
const TARGET_SEQUENTIAL_P50_MS = 3;
const TARGET_SEQUENTIAL_P99_MS = 10;

const deviceSim = () => require(path.join(ROOT, 'packages', 'device-sim', 'dist'));
const mqttLib = () => require(require.resolve('mqtt', { paths: [path.join(ROOT, 'packages', 'device-sim')] }));

/**
 * Waits for arrivals at the lights: `expect(deviceId, payload)` resolves with the arrival time
 * (performance.now()) when that light receives that payload on cmd/light1.
 */
function arrivals(lights) {
  const waiting = new Map();
  for (const light of lights) {
    light.on('received', (m) => {
      if (m.sub !== 'cmd/light1') return;
      const key = `${light.deviceId}|${m.payload.toString('utf8')}`;
      const w = waiting.get(key);
      if (w) {
        waiting.delete(key);
        w(performance.now());
      }
    });
  }
  return {
    expect(deviceId, payload, timeoutMs = 10_000) {
      const key = `${deviceId}|${payload}`;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(key);
          reject(new Error(`${deviceId} did not receive ${payload} within ${timeoutMs} ms`));
        }, timeoutMs);
        waiting.set(key, (t) => {
          clearTimeout(timer);
          resolve(t);
        });
      });
    },
  };
}

/**
 * A closed loop: `concurrency` workers send one command each and wait for it to reach the light
 * before the next, for warm-up then the measured duration. `send(deviceId, payload)` resolves
 * once the sender got its answer (HTTP 202, or the broker's PUBACK).
 */
async function closedLoop({ label, lights, concurrency, durationSeconds, warmupSeconds, send, arrival }) {
  const toDevice = createHistogram({ lowest: 1, highest: 60_000_000, figures: 3 });
  const toAnswer = createHistogram({ lowest: 1, highest: 60_000_000, figures: 3 });
  let counter = crypto.randomBytes(3).readUIntBE(0, 3);
  let done = 0;
  const failures = [];
  const start = performance.now();
  const measureFrom = start + warmupSeconds * 1000;
  const end = measureFrom + durationSeconds * 1000;
  const worker = async (w) => {
    let i = w;
    while (performance.now() < end && failures.length < 20) {
      const light = lights[i++ % lights.length];
      counter = (counter + 1) % 0x1000000;
      const payload = `solid:${counter.toString(16).toUpperCase().padStart(6, '0')}`;
      const t0 = performance.now();
      const inMeasure = t0 >= measureFrom;
      const arrived = arrival.expect(light.deviceId, payload);
      try {
        await send(light.deviceId, payload);
        const t1 = performance.now();
        const t2 = await arrived;
        if (inMeasure && t2 <= end) {
          done++;
          toAnswer.record(Math.max(1, Math.round((t1 - t0) * 1000)));
          toDevice.record(Math.max(1, Math.round((t2 - t0) * 1000)));
        }
      } catch (err) {
        arrived.catch(() => undefined);
        failures.push(String(err.message ?? err));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  const ms = (us) => Math.round(us) / 1000;
  const pct = (h) => ({ mean: ms(h.mean), p50: ms(h.percentile(50)), p90: ms(h.percentile(90)), p99: ms(h.percentile(99)), max: ms(h.max) });
  return {
    label,
    concurrency,
    duration_s: durationSeconds,
    commands: done,
    commands_per_s: done / durationSeconds,
    latency_to_device_ms: pct(toDevice),
    latency_to_answer_ms: pct(toAnswer),
    failures: failures.length,
    first_failures: failures.slice(0, 5),
  };
}

/** POSTs a JSON body on the lean client and resolves once the answer is read; rejects unless it is 202. */
async function postJson(client, route, headers, body) {
  const answer = await client.request('POST', route, headers, JSON.stringify(body));
  if (answer.status !== 202) throw new Error(`POST commands answered ${answer.status}: ${answer.body}`);
}

/**
 * CPU time so far (ms): each process of the path by name, Redis (the shared server, from INFO:
 * the gateway's limit windows), and the whole machine's busy time.
 */
async function cpuOf(pids, redisCpu) {
  const out = cpuTimesOf(pids);
  out.redis = await redisCpu.read().catch(() => null);
  out.machine = machineBusyMs();
  return out;
}

/**
 * CPU µs per command of each process between two cpuOf() readings, and the rest of the machine
 * (kernel, other processes): machine busy time minus everything named. `elapsedMs` also gives
 * the cores the machine was busy on average (busyCores), which tells a run that left cores idle
 * from one bound by CPU.
 */
function cpuPerCommand(before, after, commands, elapsedMs) {
  const out = {};
  const per = (ms) => (commands === 0 ? null : Math.round((ms * 1000) / commands));
  let named = 0;
  for (const name of Object.keys(before)) {
    if (name === 'machine') continue;
    const used = before[name] === null || after[name] === null ? null : after[name] - before[name];
    if (used !== null) named += used;
    out[name] = used === null ? null : per(used);
  }
  const machine = after.machine - before.machine;
  out['rest of machine'] = per(Math.max(0, machine - named));
  return { perCommand: out, busyCores: Math.round((machine / elapsedMs) * 100) / 100 };
}

async function run(ctx) {
  const { connections, durationSeconds, warmupSeconds, log, profileDir } = ctx;
  const lights = [];
  let baselineClient;
  let httpClient;
  let redisCpu;
  let finished = false;
  log(`starting ${SERVICES.join(', ')} (own nats-server, broker, databases, Redis prefix)...`);
  const priv = await startPrivateFleet({
    services: SERVICES,
    privateNats: true,
    logLevel: process.env.BENCH_LOG_LEVEL || 'warn',
    serviceEnv: {
      // The global per-device ceiling (default 120 per minute) would cap the rate at 2/s per light:
      // lifted here so the bench measures the path, not the limit.
      DEVICE_COMMAND_CEILING_PER_MIN: '100000000',
    },
  });
  const { fleet, id } = priv;
  ctx.onCleanup(async () => {
    await Promise.all(lights.map((l) => l.stop().catch(() => undefined)));
    if (baselineClient) await baselineClient.endAsync().catch(() => undefined);
    httpClient?.close();
    redisCpu?.close();
    await priv.cleanup({ keepLogs: !finished });
  });
  redisCpu = await redisCpuReader();
  const pids = Object.fromEntries([...SERVICES.map((name) => [name, fleet.pidOf(name)]), ['mosquitto', fleet.mqttPid], ['nats-server', fleet.natsPid], ['bench client', process.pid]]);
  const partner = await gatewayAdmin(priv.gatewayDatabaseUrl, [
    'partner', 'create', '--name', `Bench lights ${id}`, '--permissions', 'all', '--access-all-devices', '--requests-per-min', '100000000', '--device-commands-per-min', '100000000',
  ]);
  const { key } = await gatewayAdmin(priv.gatewayDatabaseUrl, ['key', 'issue', '--partner', partner.id]);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

  log(`provisioning and connecting ${LIGHT_COUNT} simulated lights...`);
  const { SimulatedLight } = deviceSim();
  for (let i = 0; i < LIGHT_COUNT; i++) {
    const deviceId = `B${id.toUpperCase().slice(0, 5)}${i.toString(16).toUpperCase().padStart(6, '0')}`;
    const res = await fetch(`${fleet.gatewayUrl}/v1/devices/${deviceId}`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET }),
    });
    if (res.status !== 201) throw new Error(`provisioning ${deviceId} answered ${res.status}: ${await res.text()}`);
    const light = new SimulatedLight({ brokerUrl: fleet.mqttUrl, deviceId, rootSecret: SECRET, logLimit: 0 });
    await light.start();
    lights.push(light);
  }
  const arrival = arrivals(lights);
  const settings = { lights, concurrency: connections, durationSeconds, warmupSeconds, arrival };

  // A lean keep-alive client (lib/lean-http.js) rather than fetch or node:http: the load generator
  // shares the machine's cores with the fleet, and those clients cost several times its CPU per request.
  httpClient = leanHttpClient(fleet.gatewayUrl, connections);
  const viaFleet = (deviceId, payload) => postJson(httpClient, `/v1/devices/${deviceId}/commands`, headers, { channel: 'light1', payload });
  const mqtt = mqttLib();
  baselineClient = await mqtt.connectAsync(fleet.mqttUrl, {
    clientId: `bench-baseline-${id}`,
    username: fleet.mqttAdmin.username,
    password: fleet.mqttAdmin.password,
    clean: true,
    reconnectPeriod: 0,
    protocolVersion: 5,
  });
  // Marked as the bridge marks what the platform sends (services/mqtt-bridge/src/broker/control.ts),
  // so the bridge treats a bare publish as it treats a fleet command coming back to it: skipped,
  // not captured as if the light had sent it. Unmarked, each bare publish cost the bridge, NATS
  // and JetStream a device-message capture that no real traffic causes, slowing the baseline.
  const platformOrigin = { userProperties: { 'fleet-origin': 'platform' } };
  const bareMqtt = async (deviceId, payload) => {
    await baselineClient.publishAsync(`light/${deviceId}/cmd/light1`, payload, { qos: 1, retain: false, properties: platformOrigin });
  };

  const step = `${warmupSeconds} s warm-up + ${durationSeconds} s, ${connections} in flight`;
  log(`bare MQTT publish → subscribe, run 1 (${step})...`);
  const bareCpuBefore = await cpuOf(pids, redisCpu);
  let started = performance.now();
  const bare1 = await closedLoop({ label: 'bare MQTT QoS 1 (1)', send: bareMqtt, ...settings });
  // The bare run's CPU per command, every process included: the bridge receives each bare publish
  // back (and skips it) and captures the lights' state reports, which light-command stores.
  const bareCpu = cpuPerCommand(bareCpuBefore, await cpuOf(pids, redisCpu), Math.round(bare1.commands * (1 + warmupSeconds / durationSeconds)), performance.now() - started);
  log(`fleet: HTTP → gateway → light-command → bridge → light (${step})...`);
  const cpuBefore = await cpuOf(pids, redisCpu);
  started = performance.now();
  const viaGateway = await closedLoop({ label: 'POST .../commands via the fleet', send: viaFleet, ...settings });
  // Over warm-up and run: commands counted in both.
  const fleetCpu = cpuPerCommand(cpuBefore, await cpuOf(pids, redisCpu), Math.round(viaGateway.commands * (1 + warmupSeconds / durationSeconds)), performance.now() - started);
  log(`bare MQTT publish → subscribe, run 2 (${step})...`);
  const bare2 = await closedLoop({ label: 'bare MQTT QoS 1 (2)', send: bareMqtt, ...settings });

  const sequential = { ...settings, concurrency: 1 };
  const seqStep = `${warmupSeconds} s warm-up + ${durationSeconds} s, one at a time`;
  log(`sequential: bare MQTT (${seqStep})...`);
  const bareSeq = await closedLoop({ label: 'bare MQTT QoS 1, sequential', send: bareMqtt, ...sequential });
  log(`sequential: fleet (${seqStep})...`);
  const fleetSeq = await closedLoop({ label: 'via the fleet, sequential', send: viaFleet, ...sequential });

  const problems = [bare1, viaGateway, bare2, bareSeq, fleetSeq].filter((r) => r.failures > 0).map((r) => `${r.label}: ${r.failures} failures, e.g. ${r.first_failures.join('; ')}`);
  const bareRate = (bare1.commands_per_s + bare2.commands_per_s) / 2;
  const bareP50 = (bare1.latency_to_device_ms.p50 + bare2.latency_to_device_ms.p50) / 2;
  finished = problems.length === 0;
  return {
    bench: 'lights',
    title: 'Light commands through the fleet to simulated lights vs bare MQTT publish → subscribe',
    settings: { connections, duration_s: durationSeconds, warmup_s: warmupSeconds, lights: LIGHT_COUNT, order: ['bare', 'fleet', 'bare', 'bare sequential', 'fleet sequential'], device_command_ceiling_per_min: 100000000, cpu_profile: Boolean(profileDir) },
    runs: { bare: [bare1, bare2], fleet: [viaGateway], sequential: { bare: bareSeq, fleet: fleetSeq } },
    cpu_us_per_command: fleetCpu.perCommand,
    bare_cpu_us_per_command: bareCpu.perCommand,
    busy_cores: { fleet: fleetCpu.busyCores, bare: bareCpu.busyCores },
    fleet_commands_per_s: viaGateway.commands_per_s,
    bare_commands_per_s: bareRate,
    rate_ratio: viaGateway.commands_per_s / bareRate,
    fleet_latency_to_device_ms: viaGateway.latency_to_device_ms,
    bare_latency_to_device_ms_p50: bareP50,
    sequential_latency_to_device_ms: fleetSeq.latency_to_device_ms,
    targets: { rate_ratio: TARGET_RATE_RATIO, sequential_p50_ms: TARGET_SEQUENTIAL_P50_MS, sequential_p99_ms: TARGET_SEQUENTIAL_P99_MS },
    pass:
      problems.length === 0 &&
      viaGateway.commands_per_s / bareRate >= TARGET_RATE_RATIO &&
      fleetSeq.latency_to_device_ms.p50 <= TARGET_SEQUENTIAL_P50_MS &&
      fleetSeq.latency_to_device_ms.p99 <= TARGET_SEQUENTIAL_P99_MS,
    invalid: problems.length ? problems : undefined,
  };
}

/** One run's CPU per command (µs) as "name n, ...; total n" ("?" where a process could not be read). */
function cpuLine(perProcess) {
  const values = Object.values(perProcess);
  const total = values.every((v) => typeof v === 'number') ? values.reduce((a, b) => a + b, 0) : null;
  return `${Object.entries(perProcess).map(([k, v]) => `${k} ${v ?? '?'}`).join(', ')}; total ${total ?? '?'}`;
}

const verdict = (met) => (met ? 'met' : 'MISSED');

function table(result) {
  const row = (r) => [
    r.label,
    r.commands_per_s.toFixed(0),
    r.latency_to_device_ms.p50.toFixed(3),
    r.latency_to_device_ms.p99.toFixed(3),
    r.latency_to_answer_ms.p50.toFixed(3),
    r.latency_to_answer_ms.p99.toFixed(3),
    String(r.commands),
    String(r.failures),
  ];
  return {
    head: ['run', 'commands/s', 'to device p50 ms', 'to device p99 ms', 'answer p50 ms', 'answer p99 ms', 'commands', 'failures'],
    rows: [row(result.runs.bare[0]), row(result.runs.fleet[0]), row(result.runs.bare[1]), row(result.runs.sequential.bare), row(result.runs.sequential.fleet)],
    notes: [
      `${result.settings.lights} lights, ${result.settings.connections} commands in flight (then one at a time); "to device" = from sending the request (or MQTT publish) to the light receiving the payload; "answer" = until the HTTP 202 (or the PUBACK).`,
      `CPU µs per command (concurrent fleet run, machine busy ${result.busy_cores.fleet} cores on average): ${cpuLine(result.cpu_us_per_command)}`,
      `CPU µs per command (first bare run, machine busy ${result.busy_cores.bare} cores): ${cpuLine(result.bare_cpu_us_per_command)}`,
      `fleet/bare command rate = ${result.rate_ratio.toFixed(3)} (target ≥ ${result.targets.rate_ratio}): ${verdict(result.rate_ratio >= result.targets.rate_ratio)}; fleet to-device p50 ${result.fleet_latency_to_device_ms.p50.toFixed(3)} ms vs bare ${result.bare_latency_to_device_ms_p50.toFixed(3)} ms`,
      `sequential to-device p50 ${result.sequential_latency_to_device_ms.p50.toFixed(3)} ms (target ≤ ${result.targets.sequential_p50_ms}), p99 ${result.sequential_latency_to_device_ms.p99.toFixed(3)} ms (target ≤ ${result.targets.sequential_p99_ms}): ${verdict(result.sequential_latency_to_device_ms.p50 <= result.targets.sequential_p50_ms && result.sequential_latency_to_device_ms.p99 <= result.targets.sequential_p99_ms)}`,
      `overall: ${result.invalid ? 'INVALID (some commands failed)' : result.pass ? 'PASS' : 'MISSED'}`,
    ],
  };
}

module.exports = {
  name: 'lights',
  description: 'POST .../commands through the fleet to connected simulated lights vs bare MQTT publish → subscribe (rate, latency to the device)',
  run,
  table,
};
