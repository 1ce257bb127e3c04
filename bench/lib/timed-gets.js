'use strict';
// Sequential GETs, timed in a process of their own.
//
// The bench process holds the fleet's fixtures, simulated devices and every answer it keeps for
// the baselines (tens of MB of heap). Each socket chunk an answer arrives in is a fresh buffer
// outside the JavaScript heap, and V8 weighs those against its limit: reading answers of
// hundreds of KB made that process run a full collection every half second or so, each pausing
// it 5–55 ms, and every request a pause met was timed that much slower (most of the p99 of a
// 7 ms read). A client with nothing else in its heap collects in a millisecond or two, as a
// partner's client would.
const http = require('node:http');
const zlib = require('node:zlib');
const { fork } = require('node:child_process');
const { performance } = require('node:perf_hooks');

/**
 * GET through one keep-alive connection with node:http (not fetch: its client costs more CPU
 * and garbage, and this process shares the machine's cores with the fleet). `request(url, keep)`
 * resolves with the ms until the whole answer arrived (its text when `keep`); a gzip answer is
 * decompressed within the measured time, as a partner's client must before using it.
 */
function getter(baseUrl, headers) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const request = (url, keep) =>
    new Promise((resolve, reject) => {
      const s = performance.now();
      const chunks = [];
      http
        .get(`${baseUrl}${url}`, { agent, headers }, (res) => {
          const gzipped = res.headers['content-encoding'] === 'gzip';
          res.on('data', (chunk) => (keep || gzipped) && chunks.push(chunk));
          res.on('end', () => {
            if (res.statusCode !== 200) return reject(new Error(`GET ${url} answered ${res.statusCode}`));
            const raw = Buffer.concat(chunks);
            const bytes = gzipped ? zlib.gunzipSync(raw) : raw;
            resolve({ ms: performance.now() - s, text: keep ? bytes.toString('utf8') : '', encoding: gzipped ? 'gzip' : 'identity', wireBytes: raw.length });
          });
        })
        .on('error', reject);
    });
  return {
    get: async (url) => (await request(url, false)).ms,
    body: async (url) => JSON.parse((await request(url, true)).text),
    /** How one answer travelled: its encoding and its bytes on the wire. */
    wire: async (url) => {
      const { encoding, wireBytes } = await request(url, true);
      return { encoding, bytes: wireBytes };
    },
    close: () => agent.destroy(),
  };
}

/** The ms of each of `urls`, one at a time on one connection, after `warmup` untimed ones. */
async function timeAll({ baseUrl, headers, warmup, urls }) {
  const { get, close } = getter(baseUrl, headers);
  try {
    for (const url of warmup) await get(url);
    const samples = [];
    for (const url of urls) samples.push(await get(url));
    return samples;
  } finally {
    close();
  }
}

/**
 * Starts the timing process. `time({ baseUrl, headers, warmup, urls })` resolves with the ms of
 * each url; `stop()` ends the process.
 */
function startTimedGets() {
  const child = fork(__filename, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const pending = new Map();
  let next = 0;
  child.on('message', ({ id, samples, error }) => {
    const job = pending.get(id);
    pending.delete(id);
    if (error) job?.reject(new Error(error));
    else job?.resolve(samples);
  });
  child.on('exit', (code) => {
    for (const job of pending.values()) job.reject(new Error(`the timing process exited (${code})`));
    pending.clear();
  });
  return {
    /** The timing process (its CPU counts as the client's). */
    pid: child.pid,
    time: (job) =>
      new Promise((resolve, reject) => {
        const id = next++;
        pending.set(id, { resolve, reject });
        child.send({ id, ...job });
      }),
    stop: () => {
      if (child.exitCode === null) child.kill();
    },
  };
}

if (require.main === module) {
  process.on('message', ({ id, ...job }) => {
    timeAll(job).then(
      (samples) => process.send({ id, samples }),
      (err) => process.send({ id, error: err.message }),
    );
  });
  process.on('disconnect', () => process.exit(0));
}

module.exports = { getter, startTimedGets };
