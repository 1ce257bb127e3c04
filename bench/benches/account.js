'use strict';
// GET /v1/account through the real gateway (key authentication, the partner's request window
// in Redis, route table, permission check, validation, the answer) against a bare express 5
// route serving the same body. Both servers run as child processes; autocannon runs here.
const fs = require('node:fs');
const path = require('node:path');
const { startPrivateFleet, gatewayAdmin, redisCpuReader } = require('../lib/fleet-setup');
const { startBareExpress, memoryOf, cpuTimeMs, ownCpuTimeMs, machineBusyMs } = require('../lib/proc');
const { measure } = require('../lib/load');
const { PROFILE_NODE_OPTIONS } = require('../lib/cpuprofile');

const TARGET_RATIO = 0.5;

async function run(ctx) {
  const { connections, durationSeconds, warmupSeconds, rounds = 1, profileDir, log } = ctx;
  // --profile: both servers write a V8 CPU profile when they exit.
  const profileOf = () => (profileDir ? PROFILE_NODE_OPTIONS : undefined);
  // BENCH_GATEWAY_NODE_OPTIONS: extra Node options for the gateway only (e.g. a --require preload
  // to try a change before making it); recorded in the results.
  const gatewayNodeOptions = [profileOf(), process.env.BENCH_GATEWAY_NODE_OPTIONS].filter(Boolean).join(' ');
  const serviceEnv = gatewayNodeOptions ? { NODE_OPTIONS: gatewayNodeOptions } : {};
  if (profileDir) fs.mkdirSync(profileDir, { recursive: true });

  log('starting the gateway (own databases, Redis prefix, port)...');
  // BENCH_LOG_LEVEL: the gateway's LOG_LEVEL (default warn: no access log line per request).
  const logLevel = process.env.BENCH_LOG_LEVEL || 'warn';
  const priv = await startPrivateFleet({ services: ['gateway'], serviceEnv, logLevel });
  ctx.onCleanup(priv.cleanup);
  // The same gateway with metrics and trace context off (FLEET_TELEMETRY=off): what they cost.
  const quiet = await startPrivateFleet({ services: ['gateway'], serviceEnv: { ...serviceEnv, FLEET_TELEMETRY: 'off' }, logLevel });
  ctx.onCleanup(quiet.cleanup);
  let bare;
  let finished = false;
  const redisCpu = await redisCpuReader();
  try {
    const gateway = priv.fleet.services.find((s) => s.name === 'gateway');
    const partner = await gatewayAdmin(priv.gatewayDatabaseUrl, ['partner', 'create', '--name', `Bench ${priv.id}`, '--permissions', 'all', '--requests-per-min', '100000000']);
    const issued = await gatewayAdmin(priv.gatewayDatabaseUrl, ['key', 'issue', '--partner', partner.id]);
    const headers = { authorization: `Bearer ${issued.key}` };
    const gatewayUrl = `${priv.fleet.gatewayUrl}/v1/account`;
    const quietGateway = quiet.fleet.services.find((s) => s.name === 'gateway');
    const quietPartner = await gatewayAdmin(quiet.gatewayDatabaseUrl, ['partner', 'create', '--name', `Bench ${quiet.id}`, '--permissions', 'all', '--requests-per-min', '100000000']);
    const quietHeaders = { authorization: `Bearer ${(await gatewayAdmin(quiet.gatewayDatabaseUrl, ['key', 'issue', '--partner', quietPartner.id])).key}` };
    const quietUrl = `${quiet.fleet.gatewayUrl}/v1/account`;
    if ((await fetch(quietUrl, { headers: quietHeaders })).status !== 200) throw new Error('the gateway without telemetry did not answer GET /v1/account');

    // One request first: it must succeed, and its body is what the baseline serves.
    const probe = await fetch(gatewayUrl, { headers });
    const probeText = await probe.text();
    if (probe.status !== 200) throw new Error(`GET /v1/account answered ${probe.status}: ${probeText}`);
    const accountBody = JSON.parse(probeText);

    bare = await startBareExpress(accountBody, { logFile: path.join(priv.logDir, 'bare-express.log'), nodeOptions: profileOf() });
    ctx.onCleanup(bare.stop);
    const bareUrl = `${bare.url}/v1/account`;
    const bareText = await (await fetch(bareUrl)).text();

    // bare, gateway, bare (, gateway, bare ...): every gateway run sits between two bare runs,
    // so a machine that speeds up or slows down during the bench shows as drift between them.
    const settings = { connections, durationSeconds, warmupSeconds };
    const idleMemory = { gateway: memoryOf(gateway.pid), bare: memoryOf(bare.pid) };
    // CPU used during each measured run: the server under test, Redis, this process (autocannon),
    // and the whole machine (so what everything else took shows: other processes, kernel softirq).
    const cpuOf = (pid) => ({ server: () => cpuTimeMs(pid), redis: redisCpu.read, load_generator: ownCpuTimeMs, machine: machineBusyMs });
    const bareCpu = cpuOf(bare.pid);
    const gatewayCpu = cpuOf(gateway.pid);
    const step = `${warmupSeconds} s warm-up + ${durationSeconds} s`;
    const bareRuns = [];
    const gatewayRuns = [];
    const quietRuns = [];
    const quietCpu = cpuOf(quietGateway.pid);
    log(`bare express, run 1 (${step})...`);
    bareRuns.push(await measure({ label: 'bare express (1)', url: bareUrl, cpu: bareCpu, ...settings }));
    for (let round = 1; round <= rounds; round++) {
      const n = rounds > 1 ? ` (${round})` : '';
      log(`gateway GET /v1/account${n} (${step})...`);
      gatewayRuns.push(await measure({ label: `gateway /v1/account${n}`, url: gatewayUrl, headers, cpu: gatewayCpu, ...settings }));
      log(`bare express, run ${bareRuns.length + 1} (${step})...`);
      bareRuns.push(await measure({ label: `bare express (${bareRuns.length + 1})`, url: bareUrl, cpu: bareCpu, ...settings }));
      log(`gateway GET /v1/account, telemetry off${n} (${step})...`);
      quietRuns.push(await measure({ label: `gateway, telemetry off${n}`, url: quietUrl, headers: quietHeaders, cpu: quietCpu, ...settings }));
      log(`bare express, run ${bareRuns.length + 1} (${step})...`);
      bareRuns.push(await measure({ label: `bare express (${bareRuns.length + 1})`, url: bareUrl, cpu: bareCpu, ...settings }));
    }

    for (const r of [...bareRuns, ...gatewayRuns, ...quietRuns]) {
      const { machine, server, redis, load_generator: loadGenerator } = r.cpu_ms;
      r.rest_of_machine_cores = Math.round(((machine - server - redis - loadGenerator) / (r.duration_s * 1000)) * 100) / 100;
    }
    const gatewayMemory = memoryOf(gateway.pid);
    const bareMemory = memoryOf(bare.pid);

    const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const meanCpu = (runs, name) => mean(runs.map((r) => r.cpu_us_per_request[name]));
    const cpuPerRequest = Object.fromEntries(
      ['server', 'redis', 'load_generator'].map((name) => [name, { bare: meanCpu(bareRuns, name), gateway: meanCpu(gatewayRuns, name) }]),
    );
    // Bare runs sit at 0, 2, 4, ...: gateway run i between bare 2i and 2i+1, the quiet one between 2i+1 and 2i+2.
    const roundRatios = gatewayRuns.map((g, i) => g.req_per_s / mean([bareRuns[2 * i].req_per_s, bareRuns[2 * i + 1].req_per_s]));
    const quietRatios = quietRuns.map((g, i) => g.req_per_s / mean([bareRuns[2 * i + 1].req_per_s, bareRuns[2 * i + 2].req_per_s]));
    const ratio = mean(roundRatios);
    const quietRatio = mean(quietRatios);
    const serverCpu = (runs) => mean(runs.map((r) => r.cpu_us_per_request.server));
    const bareMean = mean(bareRuns.map((r) => r.req_per_s));
    const bareRates = bareRuns.map((r) => r.req_per_s);
    const problems = [];
    for (const r of [...bareRuns, ...gatewayRuns, ...quietRuns]) {
      if (r.non_2xx !== 0 || r.errors !== 0 || r.timeouts !== 0) {
        problems.push(`${r.label}: ${r.non_2xx} non-2xx (status codes ${JSON.stringify(r.status_codes)}), ${r.errors} errors, ${r.timeouts} timeouts`);
      }
    }
    finished = true;
    return {
      bench: 'account',
      title: 'GET /v1/account through the gateway vs a bare express 5 JSON route',
      settings: { connections, duration_s: durationSeconds, warmup_s: warmupSeconds, rounds, order: ['bare', ...gatewayRuns.flatMap(() => ['gateway', 'bare', 'gateway telemetry off', 'bare'])], gateway_cpu_profile: Boolean(profileDir), gateway_node_options: process.env.BENCH_GATEWAY_NODE_OPTIONS || undefined, gateway_log_level: logLevel },
      body_bytes: { gateway: Buffer.byteLength(probeText), bare: Buffer.byteLength(bareText) },
      runs: { bare: bareRuns, gateway: gatewayRuns, gateway_telemetry_off: quietRuns },
      // Metrics and trace context (on by default) against the same gateway with FLEET_TELEMETRY=off:
      // the ratio to bare express should stay within 5% of the one without them.
      telemetry: {
        ratio_with: ratio,
        ratio_without: quietRatio,
        with_over_without: ratio / quietRatio,
        server_cpu_us_with: serverCpu(gatewayRuns),
        server_cpu_us_without: serverCpu(quietRuns),
        within_5pct: ratio >= 0.95 * quietRatio,
      },
      gateway_mean_req_per_s: mean(gatewayRuns.map((r) => r.req_per_s)),
      bare_mean_req_per_s: bareMean,
      // How much the machine moved during the bench: last bare run against the first (signed),
      // and the largest spread between any two bare runs against their mean.
      bare_drift_pct: ((bareRates.at(-1) - bareRates[0]) / bareRates[0]) * 100,
      bare_spread_pct: ((Math.max(...bareRates) - Math.min(...bareRates)) / bareMean) * 100,
      // Each gateway run against the mean of the bare runs either side of it; then the mean.
      round_ratios: roundRatios,
      ratio,
      target: TARGET_RATIO,
      pass: problems.length === 0 && ratio >= TARGET_RATIO,
      // CPU microseconds per request, mean over the runs: server process, Redis (shared server), autocannon.
      // Steadier than req/s on a busy machine; server bare/gateway is the CPU-cost ratio of the route itself.
      cpu_us_per_request: { ...cpuPerRequest, server_ratio_bare_to_gateway: cpuPerRequest.server.bare / cpuPerRequest.server.gateway },
      memory: {
        gateway_idle_rss_bytes: idleMemory.gateway.rss,
        bare_idle_rss_bytes: idleMemory.bare.rss,
        gateway_rss_bytes: gatewayMemory.rss,
        gateway_peak_rss_bytes: gatewayMemory.peakRss,
        bare_rss_bytes: bareMemory.rss,
        bare_peak_rss_bytes: bareMemory.peakRss,
        ratio: gatewayMemory.rss / bareMemory.rss,
      },
      invalid: problems.length ? problems : undefined,
      profile_dir: profileDir,
    };
  } finally {
    redisCpu.close();
    if (bare) await bare.stop();
    await priv.cleanup({ keepLogs: !finished });
  }
}

/** Rows for the printed table. */
function table(result) {
  const mb = (b) => `${(b / 1048576).toFixed(1)} MB`;
  const row = (r) => [
    r.label,
    r.req_per_s.toFixed(0),
    r.latency_ms.p50.toFixed(3),
    r.latency_ms.p99.toFixed(3),
    String(r.requests_total),
    String(r.non_2xx + r.errors + r.timeouts),
    String(r.cpu_us_per_request.server),
    String(r.cpu_us_per_request.redis),
    String(r.cpu_us_per_request.load_generator),
    r.rest_of_machine_cores.toFixed(2),
  ];
  return {
    head: ['run', 'req/s (mean)', 'p50 ms', 'p99 ms', 'requests', 'non-2xx/err', 'server CPU us/req', 'redis us/req', 'autocannon us/req', 'rest of machine (cores)'],
    // bare, gateway, bare, gateway with telemetry off, bare, ...
    rows: result.runs.bare.flatMap((b, i) => {
      const next = i % 2 === 0 ? result.runs.gateway[i / 2] : result.runs.gateway_telemetry_off[(i - 1) / 2];
      return [row(b), ...(next ? [row(next)] : [])];
    }),
    notes: [
      `bare mean ${result.bare_mean_req_per_s.toFixed(0)} req/s (drift first -> last bare run: ${result.bare_drift_pct >= 0 ? '+' : ''}${result.bare_drift_pct.toFixed(1)}%${result.round_ratios.length > 1 ? `, spread ${result.bare_spread_pct.toFixed(1)}%` : ''})`,
      `ratio gateway/bare = ${result.ratio.toFixed(3)}${result.round_ratios.length > 1 ? ` (rounds: ${result.round_ratios.map((r) => r.toFixed(3)).join(', ')})` : ''}   target >= ${result.target}   ${result.invalid ? 'INVALID (not every response was 2xx)' : result.pass ? 'PASS' : 'FAIL'}`,
      `memory after the run: gateway RSS ${mb(result.memory.gateway_rss_bytes)} (peak ${mb(result.memory.gateway_peak_rss_bytes)}, idle before ${mb(result.memory.gateway_idle_rss_bytes)}), bare RSS ${mb(result.memory.bare_rss_bytes)} (peak ${mb(result.memory.bare_peak_rss_bytes)}, idle before ${mb(result.memory.bare_idle_rss_bytes)}), ratio ${result.memory.ratio.toFixed(2)}`,
      `server CPU per request: gateway ${result.cpu_us_per_request.server.gateway.toFixed(0)} us, bare ${result.cpu_us_per_request.server.bare.toFixed(0)} us (bare/gateway ${result.cpu_us_per_request.server_ratio_bare_to_gateway.toFixed(3)}); Redis during gateway runs ${result.cpu_us_per_request.redis.gateway.toFixed(0)} us/req`,
      `body bytes: gateway ${result.body_bytes.gateway}, bare ${result.body_bytes.bare}`,
      `metrics and trace context: ratio to bare ${result.telemetry.ratio_with.toFixed(3)} with them, ${result.telemetry.ratio_without.toFixed(3)} without (FLEET_TELEMETRY=off), with/without ${result.telemetry.with_over_without.toFixed(3)}; server CPU ${result.telemetry.server_cpu_us_with.toFixed(0)} vs ${result.telemetry.server_cpu_us_without.toFixed(0)} us/req   ${result.telemetry.within_5pct ? 'within 5%' : 'MORE THAN 5%'}`,
    ],
  };
}

module.exports = {
  name: 'account',
  description: 'GET /v1/account through the real gateway vs a bare express 5 JSON route (target ratio >= 0.5)',
  run,
  table,
};
