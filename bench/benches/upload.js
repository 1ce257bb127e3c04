'use strict';
// A platform file upload through the real gateway: POST /v1/system/files with a 32 MB file
// (multipart/form-data, `dir` then one `file` part). The gateway asks system-files for an
// upload ticket over NATS and streams the body to system-files' file server, which parses it,
// writes the file to its storage directory (synced), hashes it and records it in Postgres.
// Against it, in the same run: a bare node:http server (bench/bare-upload-sink.js, its own
// process) that takes the same multipart POST and writes the body to a file on the same disk,
// synced, before answering 201. Uploads go one at a time, each deleted afterwards.
//
// Two targets: the upload's MB/s at least half the bare sink's (bare runs either side of each
// gateway run), and the gateway's RSS growing by less than 10 MB while the uploads pass
// through it (sampled every 50 ms): a gateway that buffered bodies would grow by the file size.
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { Readable } = require('node:stream');
const { pipeline } = require('node:stream/promises');
const { startFleet, freePort } = require('@fleet/launcher');
const { gatewayAdmin, dropDatabasesWithPrefix, deleteRedisKeys, databaseUrl } = require('../lib/fleet-setup');
const { memoryOf, cpuTimesMs, ownCpuTimeMs, machineBusyMs, startBaseline } = require('../lib/proc');
const { PROFILE_NODE_OPTIONS } = require('../lib/cpuprofile');

/** The upload route needs the gateway and system-files; the gateway's partner routes expect the registry. */
const SERVICES = ['device-registry', 'system-files', 'gateway'];
const POSTGRES_URL = process.env.POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const TARGET_RATIO = 0.5;
const TARGET_GATEWAY_GROWTH_BYTES = 10 * 1024 * 1024;
const MB = 1024 * 1024;
/** BENCH_UPLOAD_MB: the file's size in MB (default 32, system-files' UPLOAD_MAX_BYTES). */
const FILE_MB = Number(process.env.BENCH_UPLOAD_MB || 32);
/** Uploads before each measured run (discarded): connections, JIT, buffer pools. */
const WARMUP_UPLOADS = 1;
const SAMPLE_MS = 50;
/** firmware/ takes .bin names. */
const DIR = 'firmware';

/**
 * A multipart/form-data body (`dir`, then the file part) of `chunks` repeats of one buffer,
 * produced as it is sent: the bench never holds the file, only the one chunk.
 */
function multipartBody({ dir, name, chunk, chunks }) {
  const boundary = `----fleet-bench-${crypto.randomBytes(12).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="dir"\r\n\r\n${dir}\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return {
    contentType: `multipart/form-data; boundary=${boundary}`,
    length: head.length + chunk.length * chunks + tail.length,
    *parts() {
      yield head;
      for (let i = 0; i < chunks; i++) yield chunk;
      yield tail;
    },
  };
}

/**
 * One HTTP request on `agent`; resolves with { status, text, ms } once the answer was read
 * (ms: from starting the request to the answer's end). A streamed body is sent with its
 * Content-Length.
 */
function send(agent, url, { method, headers = {}, body }) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const allHeaders = body ? { ...headers, 'content-type': body.contentType, 'content-length': String(body.length) } : headers;
    const req = http.request(url, { method, agent, headers: allHeaders }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - t0 }));
    });
    req.on('error', reject);
    if (!body) {
      req.end();
      return;
    }
    // A server that answers before reading the whole body (a refusal) closes the connection:
    // its answer may still arrive after the write failed, so the failure waits for it a moment.
    pipeline(Readable.from(body.parts()), req).catch((err) => setTimeout(() => reject(err), 2000).unref());
  });
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Starts bench/bare-upload-sink.js writing into `dir`; resolves with { url, pid, stop }. */
const startUploadSink = (dir, logFile, nodeOptions) => startBaseline('bare-upload-sink.js', { label: 'bare upload sink', env: { BENCH_SINK_DIR: dir }, logFile, nodeOptions });

/**
 * Resets a process's peak RSS (VmHWM) to its current RSS (Linux: clear_refs 5), so VmHWM read
 * afterwards is the exact peak of the window, beside the 50 ms samples. False when not allowed.
 */
function resetPeakRss(pid) {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/**
 * Samples the RSS of the named processes every SAMPLE_MS from now until stop(). `before` is
 * the RSS at the start; stop() returns per process { before, peak, after, growth (peak -
 * before), vmhwm (the kernel's peak since the start, when it could be reset) } and how
 * regular the sampling was (a late timer means a peak may have been missed).
 */
function rssSampler(pids) {
  const names = Object.keys(pids);
  const before = {};
  const peak = {};
  const hwmReset = {};
  for (const name of names) {
    hwmReset[name] = resetPeakRss(pids[name]);
    before[name] = memoryOf(pids[name]).rss;
    peak[name] = before[name];
  }
  let samples = 0;
  let last = performance.now();
  let maxGapMs = 0;
  const sample = () => {
    const now = performance.now();
    maxGapMs = Math.max(maxGapMs, now - last);
    last = now;
    samples += 1;
    for (const name of names) peak[name] = Math.max(peak[name], memoryOf(pids[name]).rss);
  };
  const timer = setInterval(sample, SAMPLE_MS);
  return {
    stop() {
      clearInterval(timer);
      sample();
      const memory = {};
      for (const name of names) {
        const now = memoryOf(pids[name]);
        memory[name] = {
          before_bytes: before[name],
          peak_bytes: peak[name],
          after_bytes: now.rss,
          growth_bytes: peak[name] - before[name],
          vmhwm_bytes: hwmReset[name] ? now.peakRss : null,
        };
      }
      return { memory, samples, max_sample_gap_ms: Math.round(maxGapMs) };
    },
  };
}

/**
 * One run: WARMUP_UPLOADS, then `count` measured uploads, one at a time, each removed before
 * the next. `upload(name)` and `remove(name)` return problems (strings) or nothing. Only the
 * uploads are timed; CPU is read around each upload; RSS is sampled from just before the first
 * measured upload to the end of the last.
 */
async function uploadRun({ label, count, fileBytes, prefix, upload, remove, servers, log }) {
  const problems = [];
  let n = 0;
  const nextName = () => `${prefix}-${++n}.bin`;
  for (let i = 0; i < WARMUP_UPLOADS; i++) {
    const name = nextName();
    const answer = await upload(name);
    if (answer.problem) throw new Error(`${label}: warm-up upload ${name}: ${answer.problem}`);
    const gone = await remove(name);
    if (gone) throw new Error(`${label}: removing ${name}: ${gone}`);
  }
  const pids = Object.fromEntries(Object.entries(servers).map(([who, s]) => [who, s.pid]));
  const cpu = { ...Object.fromEntries(Object.keys(pids).map((who) => [who, 0])), bench: 0, machine: 0 };
  const kernelCpu = Object.fromEntries(Object.keys(pids).map((who) => [who, 0]));
  const readCpu = () => {
    const times = Object.fromEntries(Object.entries(pids).map(([who, pid]) => [who, cpuTimesMs(pid)]));
    return {
      ...Object.fromEntries(Object.entries(times).map(([who, t]) => [who, t.user + t.system])),
      ...Object.fromEntries(Object.entries(times).map(([who, t]) => [`${who}_kernel`, t.system])),
      bench: ownCpuTimeMs(),
      machine: machineBusyMs(),
    };
  };
  const uploadsMs = [];
  const sampler = rssSampler(pids);
  for (let i = 0; i < count; i++) {
    const name = nextName();
    const cpuBefore = readCpu();
    const answer = await upload(name);
    const cpuAfter = readCpu();
    for (const who of Object.keys(cpu)) cpu[who] += cpuAfter[who] - cpuBefore[who];
    for (const who of Object.keys(kernelCpu)) kernelCpu[who] += cpuAfter[`${who}_kernel`] - cpuBefore[`${who}_kernel`];
    if (answer.problem) {
      problems.push(`${label}: upload ${name}: ${answer.problem}`);
      continue;
    }
    uploadsMs.push(answer.ms);
    const gone = await remove(name);
    if (gone) problems.push(`${label}: removing ${name}: ${gone}`);
  }
  const { memory, samples, max_sample_gap_ms: maxSampleGapMs } = sampler.stop();
  const totalMs = uploadsMs.reduce((a, b) => a + b, 0);
  const sorted = [...uploadsMs].sort((a, b) => a - b);
  const mbytes = (uploadsMs.length * fileBytes) / MB;
  const round = (x, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;
  const serverCpu = Object.keys(pids).reduce((a, who) => a + cpu[who], 0);
  log(`${label}: ${uploadsMs.length} × ${fileBytes / MB} MB in ${(totalMs / 1000).toFixed(2)} s = ${(mbytes / (totalMs / 1000)).toFixed(1)} MB/s`);
  return {
    label,
    uploads: uploadsMs.length,
    file_bytes: fileBytes,
    total_ms: round(totalMs),
    mb_per_s: totalMs > 0 ? mbytes / (totalMs / 1000) : 0,
    upload_ms: { min: round(sorted[0] ?? 0), median: round(sorted[Math.floor(sorted.length / 2)] ?? 0), max: round(sorted.at(-1) ?? 0), each: uploadsMs.map((x) => round(x)) },
    // CPU spent during the measured uploads, in ms per MB of file: each server process, this
    // process (the client), and what the rest of the machine used (Postgres, NATS, kernel, others).
    cpu_ms_per_mb: {
      ...Object.fromEntries(Object.keys(pids).map((who) => [who, round(cpu[who] / mbytes, 2)])),
      bench: round(cpu.bench / mbytes, 2),
      rest_of_machine: round((cpu.machine - serverCpu - cpu.bench) / mbytes, 2),
    },
    // Of each server's CPU, the part spent in the kernel (socket reads and writes, file writes, fsync).
    kernel_cpu_ms_per_mb: Object.fromEntries(Object.keys(pids).map((who) => [who, round(kernelCpu[who] / mbytes, 2)])),
    memory,
    rss_samples: samples,
    max_sample_gap_ms: maxSampleGapMs,
    problems,
  };
}

async function run(ctx) {
  const { log, rounds = 1, profileDir } = ctx;
  // --profile: every service and the sink write a V8 CPU profile when they exit.
  const profileOf = () => (profileDir ? PROFILE_NODE_OPTIONS : undefined);
  if (profileDir) fs.mkdirSync(profileDir, { recursive: true });
  const uploads = Math.max(1, Math.floor(ctx.uploads ?? 6));
  if (!Number.isFinite(FILE_MB) || FILE_MB <= 0) throw new Error('BENCH_UPLOAD_MB must be a positive number of MB');
  const chunk = crypto.randomBytes(MB);
  const chunks = Math.round(FILE_MB);
  const fileBytes = chunk.length * chunks;
  // The file the product should report: every upload carries the same bytes.
  const expectedSha = (() => {
    const hash = crypto.createHash('sha256');
    for (let i = 0; i < chunks; i++) hash.update(chunk);
    return hash.digest('hex');
  })();

  const id = crypto.randomBytes(4).toString('hex');
  const databasePrefix = `fleet_bench_${id}_`;
  const redisKeyPrefix = `bench${id}:`;
  // Everything of the run in one folder on the machine's disk: logs, system-files' storage
  // (<dir>/files), the bare sink's files (<dir>/sink), the private nats-server's store.
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), `fleet-bench-upload-${id}-`));
  const logDir = path.join(workDir, 'logs');
  const sinkDir = path.join(workDir, 'sink');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let fleet;
  let sink;
  let finished = false;
  let cleaned;
  const cleanup = () => {
    cleaned ??= (async () => {
      agent.destroy();
      if (sink) await sink.stop().catch(() => undefined);
      if (fleet) await fleet.stop().catch(() => undefined);
      await dropDatabasesWithPrefix(databasePrefix).catch((err) => process.stderr.write(`bench cleanup: dropping ${databasePrefix}*: ${err.message}\n`));
      await deleteRedisKeys(redisKeyPrefix).catch((err) => process.stderr.write(`bench cleanup: Redis keys ${redisKeyPrefix}*: ${err.message}\n`));
      // BENCH_KEEP_LOGS=1 keeps the services' logs of a good run too.
      if (finished && !process.env.BENCH_KEEP_LOGS) {
        fs.rmSync(workDir, { recursive: true, force: true });
      } else {
        // Keep the logs to read; the uploaded files are of no use and large.
        for (const big of ['files', 'sink']) fs.rmSync(path.join(workDir, big), { recursive: true, force: true });
        process.stderr.write(`bench logs kept in ${logDir}\n`);
      }
    })();
    return cleaned;
  };
  ctx.onCleanup(cleanup);

  const logLevel = process.env.BENCH_LOG_LEVEL || 'warn';
  log(`starting ${SERVICES.join(', ')} (own nats-server, broker, databases, Redis prefix, storage in ${workDir})...`);
  fleet = await startFleet({
    services: SERVICES,
    databasePrefix,
    gatewayPort: await freePort(),
    logDir,
    mqttPort: 0,
    mqttDataDir: path.join(workDir, 'mosquitto'),
    // dataDir: system-files stores its files in <dataDir>/files and the URL secret beside it.
    dataDir: workDir,
    // A nats-server of the run's own: system-files' durable consumer of DEVICE_IN must not take
    // messages of another fleet on the machine's NATS.
    privateNats: true,
    env: { LOG_LEVEL: logLevel, REDIS_KEY_PREFIX: redisKeyPrefix, REDIS_URL, POSTGRES_URL, ...(profileDir ? { NODE_OPTIONS: profileOf() } : {}) },
  });
  const gatewayDb = databaseUrl(`${databasePrefix}gateway`);
  const partner = await gatewayAdmin(gatewayDb, ['partner', 'create', '--name', `Bench upload ${id}`, '--permissions', 'file_upload,file_delete', '--requests-per-min', '100000000']);
  const { key } = await gatewayAdmin(gatewayDb, ['key', 'issue', '--partner', partner.id]);
  const auth = { authorization: `Bearer ${key}` };

  sink = await startUploadSink(sinkDir, path.join(logDir, 'bare-upload-sink.log'), profileOf());
  const gatewayPid = fleet.pidOf('gateway');
  const systemFilesPid = fleet.pidOf('system-files');

  const viaGateway = {
    servers: { gateway: { pid: gatewayPid }, system_files: { pid: systemFilesPid } },
    upload: async (name) => {
      const res = await send(agent, `${fleet.gatewayUrl}/v1/system/files`, { method: 'POST', headers: auth, body: multipartBody({ dir: DIR, name, chunk, chunks }) });
      const body = parseJson(res.text);
      if (res.status !== 201) return { problem: `answered ${res.status}: ${res.text.slice(0, 300)}` };
      if (body?.size !== fileBytes || body?.sha256 !== expectedSha) return { problem: `stored ${body?.size} bytes, sha256 ${body?.sha256}; sent ${fileBytes}, ${expectedSha}` };
      return { ms: res.ms };
    },
    remove: async (name) => {
      const res = await send(agent, `${fleet.gatewayUrl}/v1/system/files?dir=${DIR}&name=${encodeURIComponent(name)}`, { method: 'DELETE', headers: auth });
      return res.status === 204 ? undefined : `DELETE answered ${res.status}: ${res.text.slice(0, 300)}`;
    },
  };
  const bare = {
    servers: { sink: { pid: sink.pid } },
    upload: async (name) => {
      const body = multipartBody({ dir: DIR, name, chunk, chunks });
      const res = await send(agent, `${sink.url}/uploads/${name}`, { method: 'POST', body });
      const answer = parseJson(res.text);
      if (res.status !== 201) return { problem: `answered ${res.status}: ${res.text.slice(0, 300)}` };
      if (answer?.size !== body.length) return { problem: `wrote ${answer?.size} bytes of ${body.length}` };
      return { ms: res.ms };
    },
    remove: async (name) => {
      const res = await send(agent, `${sink.url}/uploads/${name}`, { method: 'DELETE' });
      return res.status === 204 ? undefined : `DELETE answered ${res.status}`;
    },
  };

  // bare, gateway, bare (, gateway, bare ...): every gateway run sits between two bare runs.
  const common = { count: uploads, fileBytes, log };
  const step = `${WARMUP_UPLOADS} warm-up + ${uploads} × ${FILE_MB} MB`;
  const bareRuns = [];
  const gatewayRuns = [];
  log(`bare upload sink, run 1 (${step})...`);
  bareRuns.push(await uploadRun({ label: 'bare sink (1)', prefix: `bare-${id}-1`, ...bare, ...common }));
  for (let r = 1; r <= rounds; r++) {
    const n = rounds > 1 ? ` (${r})` : '';
    log(`gateway POST /v1/system/files${n} (${step})...`);
    gatewayRuns.push(await uploadRun({ label: `gateway /v1/system/files${n}`, prefix: `bench-${id}-${r}`, ...viaGateway, ...common }));
    log(`bare upload sink, run ${r + 1} (${step})...`);
    bareRuns.push(await uploadRun({ label: `bare sink (${r + 1})`, prefix: `bare-${id}-${r + 1}`, ...bare, ...common }));
  }

  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const roundRatios = gatewayRuns.map((g, i) => g.mb_per_s / mean([bareRuns[i].mb_per_s, bareRuns[i + 1].mb_per_s]));
  const ratio = mean(roundRatios);
  const bareRates = bareRuns.map((r) => r.mb_per_s);
  const gatewayGrowth = Math.max(...gatewayRuns.map((r) => r.memory.gateway.growth_bytes));
  const systemFilesGrowth = Math.max(...gatewayRuns.map((r) => r.memory.system_files.growth_bytes));
  const sinkGrowth = Math.max(...bareRuns.map((r) => r.memory.sink.growth_bytes));
  const problems = [...bareRuns, ...gatewayRuns].flatMap((r) => r.problems);
  const memoryPass = gatewayGrowth < TARGET_GATEWAY_GROWTH_BYTES;
  finished = problems.length === 0;
  return {
    bench: 'upload',
    title: `POST /v1/system/files (${FILE_MB} MB, multipart) through the gateway to system-files vs a bare node:http sink writing the body to disk`,
    settings: {
      file_bytes: fileBytes,
      body_bytes: multipartBody({ dir: DIR, name: `bench-${id}-1-1.bin`, chunk, chunks }).length,
      dir: DIR,
      uploads_per_run: uploads,
      warmup_uploads_per_run: WARMUP_UPLOADS,
      rounds,
      order: ['bare', ...gatewayRuns.flatMap(() => ['gateway', 'bare'])],
      rss_sample_ms: SAMPLE_MS,
      services: SERVICES,
      log_level: logLevel,
      cpu_profile: Boolean(profileDir),
    },
    runs: { bare: bareRuns, gateway: gatewayRuns },
    gateway_mean_mb_per_s: mean(gatewayRuns.map((r) => r.mb_per_s)),
    bare_mean_mb_per_s: mean(bareRates),
    bare_drift_pct: ((bareRates.at(-1) - bareRates[0]) / bareRates[0]) * 100,
    // Each gateway run against the mean of the bare runs either side of it; then the mean.
    round_ratios: roundRatios,
    ratio,
    target: TARGET_RATIO,
    memory: {
      // Largest over the gateway runs of (peak RSS during the measured uploads - RSS just before them).
      gateway_growth_bytes: gatewayGrowth,
      target_gateway_growth_bytes: TARGET_GATEWAY_GROWTH_BYTES,
      pass: memoryPass,
      system_files_growth_bytes: systemFilesGrowth,
      sink_growth_bytes: sinkGrowth,
    },
    pass: problems.length === 0 && ratio >= TARGET_RATIO && memoryPass,
    invalid: problems.length ? problems : undefined,
  };
}

/** Rows for the printed table. */
function table(result) {
  const mb = (b) => `${(b / MB).toFixed(1)}`;
  const row = (r) => {
    const servers = Object.keys(r.memory);
    return [
      r.label,
      r.mb_per_s.toFixed(1),
      r.upload_ms.median.toFixed(0),
      `${r.upload_ms.min.toFixed(0)}–${r.upload_ms.max.toFixed(0)}`,
      servers.map((s) => r.cpu_ms_per_mb[s].toFixed(1)).join(' + '),
      r.cpu_ms_per_mb.bench.toFixed(1),
      r.cpu_ms_per_mb.rest_of_machine.toFixed(1),
      servers.map((s) => `${mb(r.memory[s].before_bytes)}→${mb(r.memory[s].peak_bytes)} (+${mb(r.memory[s].growth_bytes)})`).join(', '),
    ];
  };
  const runs = result.runs.bare.flatMap((b, i) => [b, ...(result.runs.gateway[i] ? [result.runs.gateway[i]] : [])]);
  const growth = result.memory;
  return {
    head: ['run', 'MB/s', 'upload ms (median)', 'min–max', 'server CPU ms/MB', 'client ms/MB', 'rest ms/MB', 'RSS MB before→peak (+growth)'],
    rows: runs.map(row),
    notes: [
      `${result.settings.uploads_per_run} uploads of ${mb(result.settings.file_bytes)} MB per run (body ${result.settings.body_bytes} bytes), one at a time after ${result.settings.warmup_uploads_per_run} warm-up; server CPU: gateway + system-files, or the sink; RSS sampled every ${result.settings.rss_sample_ms} ms.`,
      `bare mean ${result.bare_mean_mb_per_s.toFixed(1)} MB/s (drift first -> last bare run: ${result.bare_drift_pct >= 0 ? '+' : ''}${result.bare_drift_pct.toFixed(1)}%), gateway mean ${result.gateway_mean_mb_per_s.toFixed(1)} MB/s`,
      `ratio gateway/bare = ${result.ratio.toFixed(3)}${result.round_ratios.length > 1 ? ` (rounds: ${result.round_ratios.map((r) => r.toFixed(3)).join(', ')})` : ''}   target >= ${result.target}   ${result.ratio >= result.target ? 'PASS' : 'FAIL'}`,
      `gateway RSS growth during the uploads ${mb(growth.gateway_growth_bytes)} MB   target < ${mb(growth.target_gateway_growth_bytes)} MB   ${growth.pass ? 'PASS' : 'FAIL'}; system-files +${mb(growth.system_files_growth_bytes)} MB, bare sink +${mb(growth.sink_growth_bytes)} MB (not judged)`,
      ...(result.invalid ? ['INVALID: not every upload or delete succeeded'] : []),
    ],
  };
}

module.exports = {
  name: 'upload',
  description: 'POST /v1/system/files (32 MB multipart) through the gateway vs a bare node:http sink writing to disk (target ratio >= 0.5, gateway RSS growth < 10 MB)',
  run,
  table,
};
