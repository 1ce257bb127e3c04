'use strict';
// A private fleet for one benchmark: its own databases, Redis key prefix, ports and logs, so it
// runs beside tests and other fleets on the same machine, and leaves nothing behind.
const { execFile } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Client } = require('pg');
const { Redis } = require('ioredis');
const { startFleet, freePort, ROOT } = require('@fleet/launcher');
const { PROFILE_NODE_OPTIONS } = require('./cpuprofile');

const POSTGRES_URL = process.env.POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

function databaseUrl(name) {
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * Starts the named services with a unique database prefix and Redis key prefix.
 * `serviceEnv` is added to every service's environment; under --profile (BENCH_CPU_PROFILE_DIR
 * set by bench/run.js) every service also writes a CPU profile when it stops;
 * `privateNats` starts a nats-server for this fleet alone. BENCH_SERVICE_NODE_OPTIONS (e.g.
 * `--require <absolute path>/bench/lib/gc-log-preload.js`) is given to every service as
 * NODE_OPTIONS; BENCH_KEEP_LOGS=1 keeps the work folder (service logs) after a run that went
 * well too.
 * Returns { fleet, id, databasePrefix, redisKeyPrefix, logDir, gatewayDatabaseUrl, cleanup }.
 * cleanup({ keepLogs }) stops the services, drops the databases, deletes the Redis keys and
 * removes the work folder (unless keepLogs); it is safe to call more than once.
 */
async function startPrivateFleet({ services, serviceEnv = {}, logLevel = 'warn', privateNats = false }) {
  const id = crypto.randomBytes(4).toString('hex');
  const databasePrefix = `fleet_bench_${id}_`;
  const redisKeyPrefix = `bench${id}:`;
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), `fleet-bench-${id}-`));
  const logDir = path.join(workDir, 'logs');
  const gatewayPort = await freePort();
  let fleet;
  let cleaned;
  // keepLogs: leave the work folder (service logs, broker files) for a look after a failure.
  const cleanup = ({ keepLogs = false } = {}) => {
    cleaned ??= (async () => {
      const problems = [];
      if (fleet) await fleet.stop().catch((err) => problems.push(`stop: ${err.message}`));
      await dropDatabasesWithPrefix(databasePrefix).catch((err) => problems.push(`drop databases: ${err.message}`));
      await deleteRedisKeys(redisKeyPrefix).catch((err) => problems.push(`redis keys: ${err.message}`));
      if (problems.length) process.stderr.write(`bench cleanup problems (prefix ${databasePrefix}): ${problems.join('; ')}\n`);
      if (keepLogs || problems.length || process.env.BENCH_KEEP_LOGS) process.stderr.write(`bench logs kept in ${logDir}\n`);
      else fs.rmSync(workDir, { recursive: true, force: true });
    })();
    return cleaned;
  };
  try {
    fleet = await startFleet({
      services,
      databasePrefix,
      gatewayPort,
      logDir,
      // The launcher may start an MQTT broker of its own: keep its files apart from other fleets'.
      mqttPort: 0,
      mqttDataDir: path.join(workDir, 'mosquitto'),
      // The fleet's own files (a private nats-server's store among them) stay in the work folder,
      // never in the checkout's .fleet that `npm start` uses.
      dataDir: workDir,
      // privateNats: a nats-server of the fleet's own, so its streams and load are the bench's alone.
      privateNats,
      env: {
        LOG_LEVEL: logLevel,
        REDIS_KEY_PREFIX: redisKeyPrefix,
        REDIS_URL,
        POSTGRES_URL,
        ...(process.env.BENCH_CPU_PROFILE_DIR || process.env.BENCH_SERVICE_NODE_OPTIONS
          ? { NODE_OPTIONS: [process.env.BENCH_CPU_PROFILE_DIR ? PROFILE_NODE_OPTIONS : '', process.env.BENCH_SERVICE_NODE_OPTIONS ?? ''].join(' ').trim() }
          : {}),
        ...serviceEnv,
      },
    });
  } catch (err) {
    await cleanup({ keepLogs: true });
    throw err;
  }
  return { fleet, id, databasePrefix, redisKeyPrefix, logDir, gatewayDatabaseUrl: databaseUrl(`${databasePrefix}gateway`), cleanup };
}

/** Runs the gateway's staff CLI against the given database; returns the JSON object it prints. */
function gatewayAdmin(databaseUrlOfGateway, args) {
  const cli = path.join(ROOT, 'services', 'gateway', 'dist', 'admin', 'cli.js');
  const env = { ...process.env, DATABASE_URL: databaseUrlOfGateway, HEALTH_PORT: '0', LOG_LEVEL: 'warn' };
  delete env.NODE_OPTIONS;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [cli, ...args], { env, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`gateway admin ${args.slice(0, 2).join(' ')} failed: ${stderr.trim() || err.message}`));
      try {
        resolve(JSON.parse(stdout.trim().split('\n').pop()));
      } catch {
        reject(new Error(`gateway admin ${args.slice(0, 2).join(' ')} printed no JSON: ${stdout}`));
      }
    });
  });
}

async function dropDatabasesWithPrefix(prefix) {
  const client = new Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT datname FROM pg_database WHERE left(datname, length($1)) = $1', [prefix]);
    for (const { datname } of rows) {
      await client.query(`DROP DATABASE IF EXISTS "${datname.replace(/"/g, '""')}" WITH (FORCE)`);
    }
  } finally {
    await client.end();
  }
}

async function deleteRedisKeys(prefix) {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/**
 * Reads the local Redis server's CPU time in ms (INFO cpu: used_cpu_user + used_cpu_sys).
 * The server is shared with anything else using it, so this is an upper bound for the bench.
 */
async function redisCpuReader() {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  return {
    read: async () => {
      const info = await redis.info('cpu');
      const field = (name) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
      return (field('used_cpu_user') + field('used_cpu_sys')) * 1000;
    },
    close: () => redis.disconnect(),
  };
}

/** Resolves with check()'s first truthy value, polling every 200 ms; rejects after timeoutMs. */
async function waitUntil(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

module.exports = { startPrivateFleet, gatewayAdmin, redisCpuReader, dropDatabasesWithPrefix, deleteRedisKeys, databaseUrl, waitUntil };
