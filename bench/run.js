'use strict';
// Runs the fleet's benchmarks and reports each as a ratio to a baseline measured in the same run.
//
//   npm run bench                      every benchmark
//   npm run bench -- account           only the named ones
//   npm run bench -- --list            what there is
//   options: --connections 32 --duration 10 --warmup 2 --rounds 1 --profile (CPU profile of the services)
//            --devices 2000 --messages 50 (bridge: devices connected at once, messages each per run)
//            --uploads 6 (upload: measured uploads per run)
//
// Exit code: 0 all targets met; 1 a target missed; 2 a benchmark failed or its numbers are not valid.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');
const cpuprofile = require('./lib/cpuprofile');
const { describeKernelReclaim, kernelReclaim } = require('./lib/kernel-reclaim');

/** Every benchmark, by name. Add one: a module exporting { name, description, run(ctx), table(result) }. */
const BENCHES = Object.fromEntries([require('./benches/account'), require('./benches/lights')].map((b) => [b.name, b]));

// `bridge`: mqtt-bridge capturing device messages into DEVICE_IN (--devices, --messages).
BENCHES.bridge = require('./benches/bridge-capture');

// `meter`: simulated meters through broker, bridge and meter into Postgres; read latency over a year.
BENCHES.meter = require('./benches/meter');

// `alerting`: sensor readings through broker, bridge and config-alerting; one evaluation cycle over 50,000 sensors.
BENCHES.alerting = require('./benches/alerting');

// `connectivity`: a meter's first message → the gateway showing it connected; live readings right after `online`.
BENCHES.connectivity = require('./benches/connectivity');

// `upload`: a 32 MB platform file through the gateway to system-files (--uploads); MB/s and the gateway's RSS growth.
BENCHES.upload = require('./benches/upload');

// `provisioning`: 20,000 devices through the gateway with credentials behind the broker hook; 2,000 connects through it.
BENCHES.provisioning = require('./benches/provisioning');

// `events`: push events, a device's connectivity toggle → its signed webhook delivery, beside the bridge's capture rate.
BENCHES.events = require('./benches/events');

const RESULTS_DIR = path.join(__dirname, 'results');

function usage() {
  return `usage: node bench/run.js [name ...] [--connections N] [--duration S] [--warmup S] [--rounds N] [--devices N] [--messages M] [--uploads N] [--profile] [--list]\nbenches:\n${Object.values(BENCHES)
    .map((b) => `  ${b.name.padEnd(12)} ${b.description}`)
    .join('\n')}\n`;
}

function gitCommit() {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: __dirname, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

function printTable({ head, rows, notes }) {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  process.stdout.write(`${line(head)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n`);
  for (const r of rows) process.stdout.write(`${line(r)}\n`);
  for (const n of notes) process.stdout.write(`${n}\n`);
}

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      connections: { type: 'string', default: '32' },
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      rounds: { type: 'string', default: '1' },
      devices: { type: 'string', default: '2000' },
      messages: { type: 'string', default: '50' },
      uploads: { type: 'string', default: '6' },
      profile: { type: 'boolean', default: false },
      list: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help || values.list) {
    process.stdout.write(usage());
    return 0;
  }
  const unknown = positionals.filter((n) => !BENCHES[n]);
  if (unknown.length) {
    process.stderr.write(`unknown bench(es): ${unknown.join(', ')}\n${usage()}`);
    return 2;
  }
  const names = positionals.length ? positionals : Object.keys(BENCHES);
  const number = (name) => {
    const n = Number(values[name]);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a number`);
    return n;
  };

  const cleanups = [];
  const runCleanups = async () => {
    while (cleanups.length) await cleanups.pop()().catch(() => undefined);
  };
  let interrupted = false;
  const onSignal = (signal) => {
    if (interrupted) process.exit(130);
    interrupted = true;
    process.stderr.write(`\n${signal}: stopping the bench's processes and removing its databases...\n`);
    runCleanups().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  let exitCode = 0;
  for (const name of names) {
    const bench = BENCHES[name];
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const profileDir = values.profile ? path.join(RESULTS_DIR, 'profiles', `${name}-${stamp}`) : undefined;
    // Children started with cpuprofile.PROFILE_NODE_OPTIONS write their profiles here.
    if (profileDir) process.env.BENCH_CPU_PROFILE_DIR = profileDir;
    const machine = {
      cpus: os.cpus().length,
      cpu_model: os.cpus()[0]?.model,
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
      loadavg_before: os.loadavg(),
      git_commit: gitCommit(),
      kernel_reclaim: kernelReclaim(),
    };
    process.stdout.write(`\n== ${name}: ${bench.description}\n`);
    const ctx = {
      connections: number('connections'),
      durationSeconds: number('duration'),
      warmupSeconds: number('warmup'),
      rounds: Math.max(1, Math.floor(number('rounds'))),
      devices: Math.floor(number('devices')),
      messages: Math.floor(number('messages')),
      uploads: Math.floor(number('uploads')),
      profileDir,
      log: (msg) => process.stdout.write(`   ${msg}\n`),
      onCleanup: (fn) => cleanups.push(fn),
    };
    let result;
    try {
      result = await bench.run(ctx);
    } catch (err) {
      process.stderr.write(`\n!! bench '${name}' FAILED: ${err.stack ?? err}\n`);
      exitCode = 2;
      continue;
    } finally {
      await runCleanups();
    }
    const file = path.join(RESULTS_DIR, `${name}-${stamp}.json`);
    machine.loadavg_after = os.loadavg();
    fs.writeFileSync(file, `${JSON.stringify({ timestamp: new Date().toISOString(), machine, ...result }, null, 2)}\n`);
    process.stdout.write('\n');
    printTable(bench.table(result));
    const reclaim = describeKernelReclaim(machine.kernel_reclaim);
    if (reclaim) process.stdout.write(`note: ${reclaim}\n`);
    if (result.invalid) {
      process.stderr.write(`\n!! bench '${name}' is NOT VALID: its numbers cannot be trusted:\n${result.invalid.map((p) => `   ${p}\n`).join('')}`);
      exitCode = 2;
    } else if (!result.pass) {
      exitCode = Math.max(exitCode, 1);
    }
    if (values.profile) {
      process.stdout.write('(numbers above were taken with the CPU profiler attached: compare them with care)\n');
      const files = fs.readdirSync(profileDir, { recursive: true }).filter((x) => String(x).endsWith('.cpuprofile'));
      for (const f of files) cpuprofile.print(cpuprofile.summarise(path.join(profileDir, String(f))));
    }
    process.stdout.write(`results: ${path.relative(process.cwd(), file)}\n`);
  }
  return exitCode;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`${err.stack ?? err}\n`);
    process.exit(2);
  },
);
