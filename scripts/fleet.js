// `npm start`: runs the whole fleet on this machine's Postgres, Redis and NATS, with its own
// Mosquitto (dynamic-security plugin), and keeps it running: a service that exits is started
// again (same ports and environment) after a delay that doubles from 0.5 s to 30 s while it
// keeps failing, and the rest of the fleet stays up. Ctrl-C (SIGINT), SIGTERM or SIGHUP stop
// everything.
//
// Environment (all optional; the defaults are the one fleet of this checkout):
//   GATEWAY_PORT (8080), MQTT_PORT (1884), MQTT_PUBLIC_URL (the device URL printed),
//   FLEET_DATA_DIR (.fleet: logs/, mosquitto/, nats/, fleet.json),
//   FLEET_DATABASE_PREFIX (fleet_), FLEET_PRIVATE_NATS=1 (a nats-server of the fleet's own,
//   its store in <data dir>/nats, instead of NATS_URL), FLEET_SUPERVISE=0 (stop the whole
//   fleet when a service exits, as a test harness may want), FLEET_REPLICAS
//   (e.g. `mqtt-bridge=2,meter=2`). These let a second fleet run beside the first.
const path = require('node:path');
const { startFleet, ROOT } = require('@fleet/launcher');

function replicasFromEnv(value) {
  const replicas = {};
  for (const part of (value ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
    const match = /^([a-z-]+)=(\d+)$/.exec(part);
    if (!match) throw new Error(`FLEET_REPLICAS: expected <service>=<count>, got ${part}`);
    replicas[match[1]] = Number(match[2]);
  }
  return replicas;
}

function portFromEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`${name} must be a port number, got ${raw}`);
  return port;
}

async function main() {
  const dataDir = path.resolve(process.env.FLEET_DATA_DIR || path.join(ROOT, '.fleet'));
  const logDir = path.join(dataDir, 'logs');
  const databasePrefix = process.env.FLEET_DATABASE_PREFIX || 'fleet_';
  if (!/^[a-z][a-z0-9_]*$/.test(databasePrefix)) throw new Error(`FLEET_DATABASE_PREFIX must be lowercase letters, digits and _, got ${databasePrefix}`);
  const supervise = process.env.FLEET_SUPERVISE !== '0';
  const aborter = new AbortController();
  let fleet;
  let starting;
  let stopped = false;
  let exiting = false;

  // Whatever ends this process, no service, broker or nats-server outlives it.
  const killEverything = () => {
    if (!fleet || stopped) return;
    for (const pid of [...fleet.services.map((s) => s.pid), fleet.mqttPid, fleet.natsPid]) {
      if (!pid) continue;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  process.on('exit', killEverything);

  const shutdown = async (code) => {
    if (exiting) return;
    exiting = true;
    // A start in progress is abandoned; startFleet stops what it had started.
    aborter.abort();
    await starting?.catch(() => undefined);
    try {
      if (fleet) await fleet.stop();
      stopped = true;
      // So an operator (or a script waiting on the log) knows the ports and databases are free.
      console.log('stopped: every process the fleet started has exited');
    } catch (err) {
      console.error(`stopping the fleet: ${err.message}`);
      code ||= 1;
    }
    process.exit(code);
  };
  let signals = 0;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => {
      signals += 1;
      if (signals === 1) {
        console.log(`${signal}: stopping the fleet`);
        void shutdown(0);
      } else {
        // A second signal: do not wait for a graceful stop any more.
        console.error(`${signal} again: killing the fleet`);
        process.exit(1);
      }
    });
  }

  const important = new Set(['restart-scheduled', 'broker-exit', 'nats-exit']);
  let started = false;
  starting = startFleet({
    dataDir,
    logDir,
    databasePrefix,
    mqttPort: portFromEnv('MQTT_PORT', 1884),
    gatewayPort: portFromEnv('GATEWAY_PORT', 8080),
    privateNats: process.env.FLEET_PRIVATE_NATS === '1',
    replicas: replicasFromEnv(process.env.FLEET_REPLICAS),
    supervise,
    // Ctrl-C reaches the whole foreground group: the broker and nats-server are kept out of it,
    // so they stop after the services have drained instead of under them (killEverything
    // covers every other way out).
    brokersOwnProcessGroup: true,
    signal: aborter.signal,
    onEvent: (event) => {
      if (!started || exiting) return;
      if (important.has(event.type)) console.error(event.message);
      else if (event.type === 'ready' && event.restarts > 0) console.log(event.message);
      else if (event.type === 'broker-start' || event.type === 'nats-start') console.log(event.message);
    },
    onUnexpectedExit: supervise
      ? undefined
      : (name, code, signal) => {
          console.error(`${name} exited unexpectedly (${signal ?? `code ${code}`}); stopping the fleet. Logs: ${logDir}`);
          void shutdown(1);
        },
  });
  fleet = await starting;
  started = true;
  const names = [...new Set(fleet.services.map((s) => s.name))].join(', ');
  console.log(`services: ${names} (logs in ${logDir}; pids and health ports in ${fleet.stateFile})`);
  console.log(supervise ? 'a service that exits is started again; Ctrl-C stops the fleet' : 'a service that exits stops the fleet; Ctrl-C stops it too');
  // Every process's health and Prometheus metrics, on its own port.
  for (const s of fleet.services) {
    console.log(`  ${s.instance.padEnd(20)} health http://127.0.0.1:${s.healthPort}/readyz  metrics http://127.0.0.1:${s.healthPort}/metrics`);
  }
  console.log('get a key: npm run -s admin -- partner create --name "Acme" --permissions all --access-all-devices  then  npm run -s admin -- key issue --partner <id>');
  console.log(`ready: gateway=${fleet.gatewayUrl} mqtt=${process.env.MQTT_PUBLIC_URL ?? fleet.mqttUrl}`);
}

main().catch((err) => {
  // Abandoned by a signal: shutdown() exits once everything has stopped.
  if (err.name === 'AbortError') return;
  console.error(`fleet failed to start: ${err.message}`);
  process.exit(1);
});
