// Starts the fleet's services as child processes against the local NATS, Postgres and Redis,
// plus a Mosquitto broker with the dynamic-security plugin of its own (scripts/lib/mosquitto.js),
// waits until every one reports ready, and stops them all together. Used by `npm start` and
// by the end-to-end tests.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { freePort } = require('./ports');
const { startNatsServer } = require('./nats');
const { startDynsecBroker, loadOrCreateAdminPassword } = require('./mosquitto');

const ROOT = path.resolve(__dirname, '../..');

/** Every service of the fleet, in start order. Only those that are built are started. */
const SERVICES = ['device-registry', 'light-command', 'config-alerting', 'meter', 'system-files', 'mqtt-bridge', 'gateway'];

function builtServices() {
  return SERVICES.filter((name) => fs.existsSync(path.join(ROOT, 'services', name, 'dist', 'main.js')));
}

function databaseUrl(base, name) {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

async function waitReady(url, child, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) return false;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return true;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  return false;
}

/**
 * options: { env: extra env for every service, databasePrefix: 'fleet_', gatewayPort,
 *   logDir, readyTimeoutMs, services: names to start (default: all built),
 *   mqttPort: the broker's port (0 or missing: a free one), dataDir: the run's own directory
 *   (default .fleet), mqttDataDir: the broker's config, plugin file, admin password (mode
 *   0600, generated on first start), persistence and log (default <dataDir>/mosquitto),
 *   mqttAdminUsername (default fleet-admin), privateNats: run the fleet on its own nats-server
 *   (tests and benchmarks; default: the machine's NATS_URL) }
 * Every service gets MQTT_URL, MQTT_ADMIN_USERNAME and MQTT_ADMIN_PASSWORD of that broker.
 * Resolves to { gatewayUrl, mqttUrl, services, stop }.
 */
async function startFleet(options = {}) {
  const env = { ...process.env, ...(options.env ?? {}) };
  const pgBase = env.POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
  const prefix = options.databasePrefix ?? 'fleet_';
  const logDir = options.logDir ?? path.join(ROOT, '.fleet', 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  const names = options.services ?? builtServices();
  const gatewayPort = options.gatewayPort ?? Number(env.GATEWAY_PORT ?? 8080);
  const children = [];
  let stopping = false;
  let broker;
  let nats;

  const stop = async () => {
    stopping = true;
    await stopServices();
    if (broker) await broker.stop();
    if (nats) await nats.stop();
  };

  const stopServices = async () => {
    await Promise.all(
      children.map(
        ({ child }) =>
          new Promise((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
            child.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            child.kill('SIGTERM');
          }),
      ),
    );
  };

  try {
    if (options.privateNats) {
      nats = await startNatsServer({ storeDir: path.join(options.dataDir ?? path.join(ROOT, '.fleet'), 'nats') });
      env.NATS_URL = nats.url;
    }
    const mqttDataDir = options.mqttDataDir ?? path.join(options.dataDir ?? path.join(ROOT, '.fleet'), 'mosquitto');
    broker = await startDynsecBroker({
      port: options.mqttPort || (await freePort()),
      dataDir: mqttDataDir,
      adminUsername: options.mqttAdminUsername ?? 'fleet-admin',
      adminPassword: loadOrCreateAdminPassword(mqttDataDir),
    });
    Object.assign(env, { MQTT_URL: broker.url, MQTT_ADMIN_USERNAME: broker.adminUsername, MQTT_ADMIN_PASSWORD: broker.adminPassword });
    for (const name of names) {
      const healthPort = await freePort();
      const serviceEnv = {
        ...env,
        HEALTH_PORT: String(healthPort),
        DATABASE_URL: env[`${name.toUpperCase().replace(/-/g, '_')}_DATABASE_URL`] ?? databaseUrl(pgBase, `${prefix}${name.replace(/-/g, '_')}`),
        ...(name === 'gateway' ? { GATEWAY_PORT: String(gatewayPort) } : {}),
      };
      const log = fs.openSync(path.join(logDir, `${name}.log`), 'a');
      const child = spawn(process.execPath, [path.join(ROOT, 'services', name, 'dist', 'main.js')], {
        env: serviceEnv,
        stdio: ['ignore', log, log],
      });
      fs.closeSync(log);
      const entry = { name, child, healthPort };
      children.push(entry);
      child.once('exit', (code, signal) => {
        if (!stopping) options.onUnexpectedExit?.(name, code, signal);
      });
      const ok = await waitReady(`http://127.0.0.1:${healthPort}/readyz`, child, options.readyTimeoutMs ?? 60_000);
      if (!ok) throw new Error(`${name} did not become ready; see ${path.join(logDir, `${name}.log`)}`);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    gatewayUrl: `http://127.0.0.1:${gatewayPort}`,
    mqttUrl: broker.url,
    mqttPid: broker.pid,
    mqttAdmin: { username: broker.adminUsername, password: broker.adminPassword },
    natsUrl: env.NATS_URL ?? 'nats://127.0.0.1:4222',
    services: children.map(({ name, child, healthPort }) => ({ name, pid: child.pid, healthPort })),
    stop,
  };
}

module.exports = { startFleet, freePort, builtServices, SERVICES, ROOT };
