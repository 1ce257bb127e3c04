'use strict';
// Load generation with autocannon, run in this (the bench's) process.
const { createHistogram } = require('node:perf_hooks');
const autocannon = require('autocannon');

/**
 * Runs autocannon once. autocannon's own latency histogram keeps whole milliseconds, too coarse
 * for sub-millisecond loopback answers, so latencies are also recorded here in microseconds.
 */
function fire(options) {
  const latencyUs = createHistogram({ lowest: 1, highest: 60_000_000, figures: 3 });
  return new Promise((resolve, reject) => {
    const instance = autocannon(options, (err, result) => (err ? reject(err) : resolve({ result, latencyUs })));
    instance.on('response', (_client, _status, _bytes, responseTimeMs) => {
      latencyUs.record(Math.max(1, Math.round(responseTimeMs * 1000)));
    });
  });
}

/**
 * Warms the target up for `warmupSeconds` (result discarded), then measures it for
 * `durationSeconds` with the same connections. Returns a summary of the measured run.
 * `cpu` names functions returning a process's CPU time so far in ms (async allowed); each is
 * read around the measured part and reported as CPU per request.
 */
async function measure({ label, url, headers = {}, connections, durationSeconds, warmupSeconds, cpu = {} }) {
  const common = { url, headers, connections, pipelining: 1, timeout: 10 };
  if (warmupSeconds > 0) await fire({ ...common, duration: warmupSeconds });
  const readCpu = async () => Object.fromEntries(await Promise.all(Object.entries(cpu).map(async ([name, read]) => [name, await read()])));
  const before = await readCpu();
  const { result, latencyUs } = await fire({ ...common, duration: durationSeconds });
  const after = await readCpu();
  const summary = summarise(label, result, latencyUs);
  summary.cpu_ms = Object.fromEntries(Object.keys(cpu).map((name) => [name, Math.round(after[name] - before[name])]));
  summary.cpu_us_per_request = Object.fromEntries(
    Object.keys(cpu).map((name) => [name, Math.round(((after[name] - before[name]) * 1000) / Math.max(1, result.requests.total))]),
  );
  return summary;
}

function summarise(label, r, latencyUs) {
  const ms = (us) => Math.round(us) / 1000;
  const statusCodes = Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([code, s]) => [code, s.count]));
  return {
    label,
    url: r.url,
    connections: r.connections,
    duration_s: r.duration,
    requests_total: r.requests.total,
    // Mean of autocannon's one-second samples.
    req_per_s: r.requests.average,
    req_per_s_stddev: r.requests.stddev,
    // Time from writing a request to the end of its response, as the load generator saw it.
    latency_ms: {
      mean: ms(latencyUs.mean),
      p50: ms(latencyUs.percentile(50)),
      p90: ms(latencyUs.percentile(90)),
      p99: ms(latencyUs.percentile(99)),
      max: ms(latencyUs.max),
    },
    bytes_per_s: r.throughput.average,
    status_codes: statusCodes,
    non_2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    resets: r.resets,
  };
}

module.exports = { measure };
