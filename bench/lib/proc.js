'use strict';
// Child processes of a benchmark: the bare express baseline, and reading a process's memory.
const { fork } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

/** Resident set size of a live process in bytes, from /proc/<pid>/status (VmRSS, and VmHWM = peak). */
function memoryOf(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return match ? Number(match[1]) * 1024 : null;
  };
  return { rss: kb('VmRSS'), peakRss: kb('VmHWM') };
}

const CLOCK_TICKS_PER_S = (() => {
  try {
    return Number(require('node:child_process').execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (user + system, all threads) a live process has used so far, in ms, from /proc/<pid>/stat. */
function cpuTimeMs(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at state; utime, stime are 14th, 15th overall.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
}

/** The same split into user and system (kernel) time, in ms: { user, system }. */
function cpuTimesMs(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: (Number(fields[11]) * 1000) / CLOCK_TICKS_PER_S, system: (Number(fields[12]) * 1000) / CLOCK_TICKS_PER_S };
}

/** CPU time so far (ms) of each named process ({ name: pid }); null for one without a pid or gone. */
function cpuTimesOf(pids) {
  const out = {};
  for (const [name, pid] of Object.entries(pids)) {
    try {
      out[name] = pid ? cpuTimeMs(pid) : null;
    } catch {
      out[name] = null;
    }
  }
  return out;
}

/**
 * CPU time so far of every Postgres process on the machine (the postmaster, its backends and
 * workers), in ms by pid. The bench's databases share the machine's one server: during a bench
 * nothing else uses it. Compare two readings with postgresCpuSpentMs.
 */
function postgresCpuMs() {
  const byPid = new Map();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) === 'postgres') byPid.set(entry, cpuTimeMs(entry));
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return byPid;
}

/**
 * Postgres CPU ms spent between two postgresCpuMs() readings: per process, so a backend or
 * autovacuum worker that exits in between does not make the sum fall. A process that started in
 * between counts whole; one that ended counts nothing (its last moments are not on record).
 */
function postgresCpuSpentMs(before, after) {
  let ms = 0;
  for (const [pid, now] of after) ms += now - (before.get(pid) ?? 0);
  return ms;
}

/** Busy CPU time of the whole machine so far (all cores, everything but idle and iowait), in ms, from /proc/stat. */
function machineBusyMs() {
  const [, ...ticks] = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/);
  const [user, nice, system, , , irq, softirq, steal] = ticks.map(Number);
  return ((user + nice + system + irq + softirq + steal) * 1000) / CLOCK_TICKS_PER_S;
}

/** CPU time of this process (the load generator), in ms. */
function ownCpuTimeMs() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * Starts a baseline server (`script` under bench/, which reports `{ port }` over IPC once it
 * listens) as a child process; resolves with { url, pid, stop }. The child gets the same Node,
 * `env` added to this process's environment, and no NODE_OPTIONS but `nodeOptions`.
 */
function startBaseline(script, { label = script, env: extra = {}, logFile, nodeOptions } = {}) {
  const env = { ...process.env, ...extra };
  delete env.NODE_OPTIONS;
  if (nodeOptions) env.NODE_OPTIONS = nodeOptions;
  const out = logFile ? fs.openSync(logFile, 'a') : 'ignore';
  const child = fork(path.join(__dirname, '..', script), [], { env, stdio: ['ignore', out, out, 'ipc'] });
  if (typeof out === 'number') fs.closeSync(out);
  const stop = () =>
    new Promise((done) => {
      if (child.exitCode !== null || child.signalCode !== null) return done();
      const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
      child.once('exit', () => {
        clearTimeout(kill);
        done();
      });
      child.kill('SIGTERM');
    });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${label} did not start within 10 s`));
    }, 10_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${label} exited early (code ${code}, signal ${signal})${logFile ? `; see ${logFile}` : ''}`));
    });
    child.once('message', ({ port }) => {
      clearTimeout(timer);
      child.removeAllListeners('exit');
      resolve({ url: `http://127.0.0.1:${port}`, pid: child.pid, stop });
    });
  });
}

/** The bare express baseline (bench/bare-express.js) answering every GET with `body`. */
const startBareExpress = (body, { logFile, nodeOptions } = {}) =>
  startBaseline('bare-express.js', { label: 'bare express baseline', env: { BENCH_BODY: JSON.stringify(body) }, logFile, nodeOptions });

/** The bare express baseline answering each path of `bodiesFile` (a JSON file of { path: body }) with its body. */
const startBareExpressWith = (bodiesFile, { logFile, nodeOptions } = {}) =>
  startBaseline('bare-express.js', { label: 'bare express baseline', env: { BENCH_BODIES_FILE: bodiesFile }, logFile, nodeOptions });

module.exports = { memoryOf, cpuTimeMs, cpuTimesMs, cpuTimesOf, postgresCpuMs, postgresCpuSpentMs, ownCpuTimeMs, machineBusyMs, startBaseline, startBareExpress, startBareExpressWith };
