// Starts the fleet's services as child processes against the local NATS, Postgres and Redis,
// plus a Mosquitto broker with the dynamic-security plugin of its own (mosquitto.js),
// waits until every one reports ready, optionally supervises them (a service that exits is
// started again with exponential backoff, on the same ports and environment, while the rest
// of the fleet keeps running), and stops them all together. Used by `npm start`, the
// end-to-end tests and the benchmarks.
const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { freePort } = require('./ports');
const { startNatsServer } = require('./nats');
const { startDynsecBroker, loadOrCreateAdminPassword } = require('./mosquitto');
const { ROOT, SERVICES, SERVICE_LIST, builtServices } = require('./services');

/** Restart delays: 0.5 s doubling to 30 s; a process that stayed up a minute starts over at 0.5 s. */
const DEFAULT_BACKOFF = { initialMs: 500, factor: 2, maxMs: 30_000, resetAfterMs: 60_000 };

/** Signals that do not end a process: kill() does not wait for an exit after them. */
const NON_FATAL_SIGNALS = new Set([0, 'SIGSTOP', 'SIGCONT', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU', 'SIGWINCH', 'SIGURG', 'SIGCHLD']);

function ownsDatabase(name) {
  return SERVICE_LIST.find((s) => s.name === name)?.database ?? true;
}

function databaseUrl(base, name) {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The delay before restart number `attempt` (1, 2, ...) of a process that keeps failing. */
function restartDelay(attempt, backoff = DEFAULT_BACKOFF) {
  const { initialMs, factor, maxMs } = { ...DEFAULT_BACKOFF, ...backoff };
  return Math.min(maxMs, Math.round(initialMs * factor ** Math.max(0, attempt - 1)));
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

function isAlive(pid) {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

async function readyzOk(port) {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

/**
 * A secret the run keeps in its data directory (mode 0600), made on first use: the signing key
 * of system-files' download URLs and upload tickets, shared by its replicas and kept across
 * restarts so URLs handed to devices stay valid.
 */
function loadOrCreateSecret(dataDir, name) {
  fs.mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, name);
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  const secret = crypto.randomBytes(32).toString('base64url');
  fs.writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  return secret;
}

function seconds(ms) {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

function describeExit(code, signal) {
  return signal ? `signal ${signal}` : `code ${code}`;
}

/**
 * options:
 *   env: extra env for every service; databasePrefix ('fleet_'); gatewayPort (default
 *     GATEWAY_PORT or 8080); logDir (default <ROOT>/.fleet/logs); readyTimeoutMs (60000, per
 *     service at start); services: names to start (default: every built one);
 *   replicas: { <service>: n } runs n processes of a service (default 1 each; not the
 *     gateway, which owns one port). Each replica has its own HEALTH_PORT and
 *     SERVICE_INSTANCE `<service>-<replica>` (replica 0, 1, ...), kept across restarts; logs
 *     go to `<service>.log`, or `<service>-<replica>.log` when there are several;
 *   mqttPort: the broker's port (0 or missing: a free one); dataDir: the run's own directory
 *     (default <ROOT>/.fleet); mqttDataDir: the broker's config, plugin file, admin password
 *     (mode 0600, generated on first start), persistence and log (default <dataDir>/mosquitto);
 *     mqttAdminUsername (default fleet-admin);
 *   privateNats: run the fleet on its own nats-server with its store in <dataDir>/nats, so
 *     JetStream streams survive a restart of the fleet on the same dataDir (default: the
 *     machine's NATS_URL); natsPort (default: a free one);
 *   supervise (default false): restart a service that exits without the fleet having
 *     stopped it (and the fleet's Mosquitto or private nats-server, on the same port and
 *     data), after restartDelay(attempt, backoff); without it such an exit is only reported;
 *   backoff: { initialMs: 500, factor: 2, maxMs: 30000, resetAfterMs: 60000 } (a process up
 *     for resetAfterMs before it exited is restarted after initialMs again);
 *   stopGraceMs (10000): how long stop() waits after SIGTERM before SIGKILL;
 *   brokersOwnProcessGroup (default false): Mosquitto and the private nats-server run in
 *     process groups of their own, so a terminal's Ctrl-C reaches the caller and the services
 *     but not them, and stop() ends them after the services have drained (the caller must
 *     kill them should it exit any other way, as scripts/fleet.js does);
 *   stateFile: where the fleet's current pids and ports are kept as JSON while it runs
 *     (default <dataDir>/fleet.json when dataDir is given, none otherwise; removed by stop());
 *   onEvent(event): every event (see below); onUnexpectedExit(name, code, signal, replica):
 *     a service exited without the fleet stopping it (supervised or not);
 *   signal: an AbortSignal that abandons a start in progress (what was started is stopped).
 * Every service gets MQTT_URL, MQTT_ADMIN_USERNAME and MQTT_ADMIN_PASSWORD of that broker;
 * an MQTT_URL in options.env (a broker of the caller's) replaces that broker's URL.
 *
 * Events: { type, message, time, ... } with type one of
 *   spawn { name, replica, instance, pid, healthPort, restart } (restart 0 at start),
 *   ready { name, replica, instance, pid, healthPort, restarts },
 *   exit { name, replica, instance, pid, code, signal, uptimeMs, expected },
 *   restart-scheduled { name, replica, instance, pid, code, signal, attempt, delayMs, logFile },
 *   broker-exit { pid }, broker-start { pid, url, reason }, nats-exit { pid, code, signal },
 *   nats-start { pid, url }, stopping, stopped.
 *
 * Resolves to { gatewayUrl, mqttUrl, mqttPid, mqttAdmin, natsUrl, natsPid, dataDir, stateFile,
 *   services, pidOf, kill, waitReady, stopService, startService, restartBroker, onEvent, stop };
 *   see the handle below.
 */
async function startFleet(options = {}) {
  const env = { ...process.env, ...(options.env ?? {}) };
  const pgBase = env.POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
  const prefix = options.databasePrefix ?? 'fleet_';
  const dataDir = path.resolve(options.dataDir ?? path.join(ROOT, '.fleet'));
  const logDir = options.logDir ?? path.join(ROOT, '.fleet', 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  const names = options.services ?? builtServices();
  const replicas = options.replicas ?? {};
  for (const [name, count] of Object.entries(replicas)) {
    if (!Number.isInteger(count) || count < 1) throw new Error(`replicas.${name} must be a whole number of at least 1`);
    if (!names.includes(name)) throw new Error(`replicas.${name}: ${name} is not among the services started`);
    if (name === 'gateway' && count > 1) throw new Error('the gateway runs once: its replicas would share GATEWAY_PORT');
  }
  const gatewayPort = options.gatewayPort ?? Number(env.GATEWAY_PORT ?? 8080);
  const supervise = options.supervise ?? false;
  const backoff = { ...DEFAULT_BACKOFF, ...(options.backoff ?? {}) };
  const stopGraceMs = options.stopGraceMs ?? 10_000;
  const stateFile = options.stateFile ?? (options.dataDir ? path.join(dataDir, 'fleet.json') : undefined);
  const abortSignal = options.signal;
  const listeners = new Set(options.onEvent ? [options.onEvent] : []);
  /** One entry per replica: its fixed identity and environment, and its current process. */
  const entries = [];
  const timers = new Set();
  let stopping = false;
  let stopPromise;
  let broker;
  let brokerOptions;
  let brokerTask; // a restart of the broker in progress
  let brokerAttempt = 0;
  let brokerStartedAt = 0;
  let brokerWatch;
  let nats;
  let natsTask;
  let natsAttempt = 0;
  let natsStartedAt = 0;

  const emit = (event) => {
    const full = { time: new Date().toISOString(), ...event };
    for (const listener of listeners) {
      try {
        listener(full);
      } catch {
        // a listener's failure is its own
      }
    }
  };

  const later = (ms, fn) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
  };

  const label = (entry) => (entry.count > 1 ? `${entry.name}[${entry.replica}]` : entry.name);

  const writeState = () => {
    if (!stateFile || stopping) return;
    const state = {
      pid: process.pid,
      dataDir,
      gatewayUrl: `http://127.0.0.1:${gatewayPort}`,
      mqttUrl: broker?.url ?? null,
      mqttPid: broker?.pid ?? null,
      natsUrl: env.NATS_URL ?? 'nats://127.0.0.1:4222',
      natsPid: nats?.pid ?? null,
      services: entries.map((e) => ({
        name: e.name,
        replica: e.replica,
        instance: e.instance,
        pid: e.child?.pid ?? null,
        healthPort: e.healthPort,
        state: e.state,
        restarts: e.restarts,
        logFile: e.logFile,
      })),
      updatedAt: new Date().toISOString(),
    };
    try {
      fs.mkdirSync(path.dirname(stateFile), { recursive: true });
      const tmp = `${stateFile}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`);
      fs.renameSync(tmp, stateFile);
    } catch {
      // the state file is a convenience; the fleet runs without it
    }
  };

  const checkAborted = () => {
    if (abortSignal?.aborted) {
      const err = new Error('fleet start abandoned');
      err.name = 'AbortError';
      throw err;
    }
  };

  const running = (entry, child) => entry.child === child && child.exitCode === null && child.signalCode === null;

  /** Polls /readyz of the entry's process until it answers 200 (true) or the process is gone, the fleet stops, or the deadline passes (false). */
  const pollReady = async (entry, child, deadline) => {
    while (!stopping && running(entry, child) && !abortSignal?.aborted) {
      if (await readyzOk(entry.healthPort)) {
        if (!running(entry, child)) return false;
        entry.state = 'ready';
        entry.readyAt = Date.now();
        emit({
          type: 'ready',
          name: entry.name,
          replica: entry.replica,
          instance: entry.instance,
          pid: child.pid,
          healthPort: entry.healthPort,
          restarts: entry.restarts,
          message: `${label(entry)} ready (pid ${child.pid}, health port ${entry.healthPort}${entry.restarts ? `, restart ${entry.restarts}` : ''})`,
        });
        writeState();
        return true;
      }
      if (deadline !== undefined && Date.now() > deadline) return false;
      await sleep(150);
    }
    return false;
  };

  const onChildExit = (entry, child, code, signal) => {
    if (entry.child !== child) return;
    entry.child = null;
    const uptimeMs = Date.now() - entry.startedAt;
    const expected = stopping || entry.expectedExit;
    entry.state = expected ? 'stopped' : 'exited';
    emit({
      type: 'exit',
      name: entry.name,
      replica: entry.replica,
      instance: entry.instance,
      pid: child.pid,
      code,
      signal,
      uptimeMs,
      expected,
      message: `${label(entry)} (pid ${child.pid}) exited with ${describeExit(code, signal)} after ${seconds(uptimeMs)}`,
    });
    if (expected) return;
    options.onUnexpectedExit?.(entry.name, code, signal, entry.replica);
    if (supervise && entry.supervised) {
      if (uptimeMs >= backoff.resetAfterMs) entry.attempt = 0;
      entry.attempt += 1;
      const delayMs = restartDelay(entry.attempt, backoff);
      entry.state = 'backoff';
      emit({
        type: 'restart-scheduled',
        name: entry.name,
        replica: entry.replica,
        instance: entry.instance,
        pid: child.pid,
        code,
        signal,
        attempt: entry.attempt,
        delayMs,
        logFile: entry.logFile,
        message:
          `${label(entry)} (pid ${child.pid}) exited unexpectedly with ${describeExit(code, signal)}; ` +
          `restart attempt ${entry.attempt} in ${seconds(delayMs)}; log: ${entry.logFile}`,
      });
      later(delayMs, () => {
        if (stopping) return;
        entry.restarts += 1;
        const next = spawnEntry(entry);
        void pollReady(entry, next);
      });
    }
    writeState();
  };

  const spawnEntry = (entry) => {
    const log = fs.openSync(entry.logFile, 'a');
    let child;
    try {
      child = spawn(process.execPath, [path.join(ROOT, 'services', entry.name, 'dist', 'main.js')], {
        env: entry.env,
        stdio: ['ignore', log, log],
      });
    } finally {
      fs.closeSync(log);
    }
    entry.child = child;
    entry.state = 'starting';
    entry.startedAt = Date.now();
    entry.expectedExit = false;
    let seen = false;
    const exited = (code, signal) => {
      if (seen) return;
      seen = true;
      onChildExit(entry, child, code, signal);
    };
    child.once('exit', exited);
    // A process that could not be started at all reports 'error' and may never report 'exit'.
    child.once('error', () => setTimeout(() => exited(child.exitCode ?? 1, child.signalCode), 50));
    emit({
      type: 'spawn',
      name: entry.name,
      replica: entry.replica,
      instance: entry.instance,
      pid: child.pid,
      healthPort: entry.healthPort,
      restart: entry.restarts,
      message: `${label(entry)} started (pid ${child.pid}, health port ${entry.healthPort}${entry.restarts ? `, restart ${entry.restarts}` : ''})`,
    });
    writeState();
    return child;
  };

  const stopEntry = (entry) =>
    new Promise((resolve) => {
      const child = entry.child;
      if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
      entry.expectedExit = true;
      const timer = setTimeout(() => child.kill('SIGKILL'), stopGraceMs);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill('SIGTERM');
      // A stopped (SIGSTOPped) process cannot act on SIGTERM until it runs again.
      child.kill('SIGCONT');
    });

  const startBroker = async (reason) => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        broker = await startDynsecBroker(brokerOptions);
        break;
      } catch (err) {
        // The port may still be held for a moment by the broker that just exited.
        if (Date.now() > deadline || stopping) throw err;
        await sleep(250);
      }
    }
    brokerStartedAt = Date.now();
    emit({ type: 'broker-start', pid: broker.pid, url: broker.url, reason, message: `mosquitto started (pid ${broker.pid}, ${broker.url}, ${reason})` });
    writeState();
    return broker;
  };

  /** Supervised: watches the broker's process (its launcher gives no exit notice) and starts it again on the same port and data. */
  const watchBroker = () => {
    brokerWatch = setInterval(() => {
      if (stopping || brokerTask || !broker || isAlive(broker.pid)) return;
      const pid = broker.pid;
      if (Date.now() - brokerStartedAt >= backoff.resetAfterMs) brokerAttempt = 0;
      brokerAttempt += 1;
      const delayMs = restartDelay(brokerAttempt, backoff);
      emit({ type: 'broker-exit', pid, attempt: brokerAttempt, delayMs, message: `mosquitto (pid ${pid}) exited unexpectedly; restart attempt ${brokerAttempt} in ${seconds(delayMs)}; log: ${broker.logFile}` });
      brokerTask = (async () => {
        await sleep(delayMs);
        if (stopping) return;
        await startBroker('restarted after an exit');
      })()
        .catch((err) => emit({ type: 'broker-exit', pid, message: `mosquitto could not be started again: ${err.message}` }))
        .finally(() => {
          brokerTask = undefined;
        });
    }, 500);
  };

  const startNats = async (port) => {
    nats = await startNatsServer({
      port,
      storeDir: path.join(dataDir, 'nats'),
      stopGraceMs,
      ownProcessGroup: options.brokersOwnProcessGroup,
      onExit: (code, signal) => {
        const pid = nats.pid;
        emit({ type: 'nats-exit', pid, code, signal, message: `nats-server (pid ${pid}) exited with ${describeExit(code, signal)}` });
        if (!supervise || stopping) return;
        if (Date.now() - natsStartedAt >= backoff.resetAfterMs) natsAttempt = 0;
        natsAttempt += 1;
        natsTask = (async () => {
          await sleep(restartDelay(natsAttempt, backoff));
          if (!stopping) await startNats(port);
        })()
          .catch((err) => emit({ type: 'nats-exit', pid, message: `nats-server could not be started again: ${err.message}` }))
          .finally(() => {
            natsTask = undefined;
          });
      },
    });
    natsStartedAt = Date.now();
    emit({ type: 'nats-start', pid: nats.pid, url: nats.url, message: `nats-server started (pid ${nats.pid}, ${nats.url}, store ${path.join(dataDir, 'nats')})` });
    writeState();
  };

  const stop = () => {
    stopPromise ??= (async () => {
      stopping = true;
      emit({ type: 'stopping', message: 'stopping the fleet' });
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      if (brokerWatch) clearInterval(brokerWatch);
      await Promise.all(entries.map(stopEntry));
      await brokerTask?.catch(() => undefined);
      if (broker) await broker.stop();
      await natsTask?.catch(() => undefined);
      if (nats) await nats.stop();
      if (stateFile) fs.rmSync(stateFile, { force: true });
      emit({ type: 'stopped', message: 'fleet stopped' });
    })();
    return stopPromise;
  };

  try {
    checkAborted();
    if (options.privateNats) {
      await startNats(options.natsPort || (await freePort()));
      env.NATS_URL = nats.url;
    }
    checkAborted();
    const mqttDataDir = options.mqttDataDir ?? path.join(dataDir, 'mosquitto');
    brokerOptions = {
      port: options.mqttPort || (await freePort()),
      dataDir: mqttDataDir,
      adminUsername: options.mqttAdminUsername ?? 'fleet-admin',
      adminPassword: loadOrCreateAdminPassword(mqttDataDir),
      ownProcessGroup: options.brokersOwnProcessGroup,
    };
    await startBroker('fleet start');
    Object.assign(env, { MQTT_URL: broker.url, MQTT_ADMIN_USERNAME: broker.adminUsername, MQTT_ADMIN_PASSWORD: broker.adminPassword });
    // A broker the caller names itself (options.env.MQTT_URL, e.g. one that asks the registry's
    // authentication hook) is the services' broker; a shell's MQTT_URL is not.
    if (options.env?.MQTT_URL) env.MQTT_URL = options.env.MQTT_URL;
    for (const name of names) {
      const count = replicas[name] ?? 1;
      for (let replica = 0; replica < count; replica += 1) {
        checkAborted();
        const healthPort = await freePort();
        const instance = `${name}-${replica}`;
        const entry = {
          name,
          replica,
          count,
          instance,
          healthPort,
          logFile: path.join(logDir, count > 1 ? `${instance}.log` : `${name}.log`),
          env: {
            ...env,
            HEALTH_PORT: String(healthPort),
            SERVICE_INSTANCE: instance,
            ...(ownsDatabase(name)
              ? { DATABASE_URL: env[`${name.toUpperCase().replace(/-/g, '_')}_DATABASE_URL`] ?? databaseUrl(pgBase, `${prefix}${name.replace(/-/g, '_')}`) }
              : {}),
            ...(name === 'gateway' ? { GATEWAY_PORT: String(gatewayPort) } : {}),
            // Platform files live in the run's own directory; each replica's file server takes a free port.
            ...(name === 'system-files'
              ? {
                  FILES_HTTP_PORT: env.FILES_HTTP_PORT ?? '0',
                  FILE_STORAGE_DIR: env.FILE_STORAGE_DIR ?? path.join(dataDir, 'files'),
                  FILES_URL_SECRET: env.FILES_URL_SECRET ?? loadOrCreateSecret(dataDir, 'files-url-secret'),
                }
              : {}),
            // The local fleet lets partners try webhooks against a receiver on the same machine.
            ...(name === 'events'
              ? {
                  EVENTS_STREAM_PORT: env.EVENTS_STREAM_PORT ?? '0',
                  WEBHOOK_LOCAL_RECEIVERS: env.WEBHOOK_LOCAL_RECEIVERS ?? 'true',
                  WEBHOOK_SECRETS_KEY: env.WEBHOOK_SECRETS_KEY ?? loadOrCreateSecret(dataDir, 'webhook-secrets-key'),
                }
              : {}),
          },
          child: null,
          state: 'starting',
          startedAt: 0,
          readyAt: 0,
          restarts: 0,
          attempt: 0,
          supervised: false,
          expectedExit: false,
        };
        entries.push(entry);
        const child = spawnEntry(entry);
        const ok = await pollReady(entry, child, Date.now() + (options.readyTimeoutMs ?? 60_000));
        checkAborted();
        if (!ok) throw new Error(`${label(entry)} did not become ready; see ${entry.logFile}`);
        entry.supervised = true;
      }
    }
    if (supervise) watchBroker();
  } catch (err) {
    await stop();
    throw err;
  }

  const find = (name, replica = 0) => {
    const entry = entries.find((e) => e.name === name && e.replica === replica);
    if (!entry) throw new Error(`no service ${name} replica ${replica} in this fleet`);
    return entry;
  };

  const services = entries.map((entry) => ({
    name: entry.name,
    replica: entry.replica,
    instance: entry.instance,
    healthPort: entry.healthPort,
    logFile: entry.logFile,
    /** The current process (null while it is down). */
    get pid() {
      return entry.child?.pid ?? null;
    },
    /** starting | ready (answered /readyz since it was last started) | exited | backoff | stopped */
    get state() {
      return entry.state;
    },
    get restarts() {
      return entry.restarts;
    },
  }));

  return {
    gatewayUrl: `http://127.0.0.1:${gatewayPort}`,
    mqttUrl: broker.url,
    /** The broker's current process. */
    get mqttPid() {
      return broker.pid;
    },
    mqttAdmin: { username: broker.adminUsername, password: broker.adminPassword },
    natsUrl: env.NATS_URL ?? 'nats://127.0.0.1:4222',
    /** The private nats-server's current process (null on the machine's NATS). */
    get natsPid() {
      return nats?.pid ?? null;
    },
    dataDir,
    stateFile: stateFile ?? null,
    supervise,
    /** One entry per replica: { name, replica, instance, healthPort, logFile, pid, state, restarts }. */
    services,
    /** The pid of a replica's current process, or null while it is down. */
    pidOf: (name, replica = 0) => find(name, replica).child?.pid ?? null,
    /**
     * Sends a signal (default SIGKILL) to a replica's current process, as a crash or an
     * operator would: a supervised fleet restarts it. Resolves to { pid, code, signal } once
     * that process has exited (right away for SIGSTOP, SIGCONT and other signals that do
     * not end it); rejects when the replica is not running or does not exit in timeoutMs.
     */
    kill: async (name, { replica = 0, signal = 'SIGKILL', timeoutMs = 15_000 } = {}) => {
      const entry = find(name, replica);
      const child = entry.child;
      if (!child || child.exitCode !== null || child.signalCode !== null) throw new Error(`${label(entry)} is not running`);
      const pid = child.pid;
      if (NON_FATAL_SIGNALS.has(signal)) {
        child.kill(signal);
        return { pid, code: null, signal: null };
      }
      const exited = new Promise((resolve) => child.once('exit', (code, sig) => resolve({ pid, code, signal: sig })));
      child.kill(signal);
      let timer;
      const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${label(entry)} (pid ${pid}) did not exit after ${signal}`)), timeoutMs);
      });
      try {
        return await Promise.race([exited, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
    /**
     * Resolves to { pid, healthPort } once the replica's current process answers /readyz
     * with 200 now (after a restart: the new process; after restartBroker: once it is
     * connected again); rejects after timeoutMs (default 60000) or when the fleet stops.
     */
    waitReady: async (name, { replica = 0, timeoutMs = 60_000 } = {}) => {
      const entry = find(name, replica);
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (stopping) throw new Error('the fleet is stopping');
        const child = entry.child;
        if (child && running(entry, child) && (await readyzOk(entry.healthPort)) && running(entry, child)) {
          return { pid: child.pid, healthPort: entry.healthPort };
        }
        if (Date.now() > deadline) throw new Error(`${label(entry)} not ready within ${timeoutMs} ms (state ${entry.state})`);
        await sleep(100);
      }
    },
    /**
     * Stops a replica as an operator would (SIGTERM, SIGKILL after stopGraceMs) and keeps it
     * stopped: supervision does not restart it until startService. Resolves once it exited.
     */
    stopService: async (name, { replica = 0 } = {}) => {
      const entry = find(name, replica);
      await stopEntry(entry);
      entry.state = 'stopped';
      writeState();
    },
    /** Starts a replica that stopService stopped, with its environment; resolves to { pid, healthPort } once ready. */
    startService: async (name, { replica = 0, timeoutMs = 60_000 } = {}) => {
      if (stopping) throw new Error('the fleet is stopping');
      const entry = find(name, replica);
      if (entry.child && running(entry, entry.child)) throw new Error(`${label(entry)} is running`);
      const child = spawnEntry(entry);
      if (!(await pollReady(entry, child, Date.now() + timeoutMs))) throw new Error(`${label(entry)} did not become ready; see ${entry.logFile}`);
      return { pid: child.pid, healthPort: entry.healthPort };
    },
    /**
     * Stops the fleet's Mosquitto gracefully (SIGTERM: it writes its persistence file) and
     * starts it again on the same port and data directory, so retained messages, persistent
     * sessions and dynamic-security changes are reloaded. Resolves to { pid, url } once it
     * accepts connections. Services stay up and reconnect.
     */
    restartBroker: async () => {
      if (stopping) throw new Error('the fleet is stopping');
      while (brokerTask) await brokerTask.catch(() => undefined);
      const task = (async () => {
        const old = broker;
        await old.stop();
        emit({ type: 'broker-exit', pid: old.pid, message: `mosquitto (pid ${old.pid}) stopped for a restart` });
        brokerAttempt = 0;
        const started = await startBroker('restartBroker');
        return { pid: started.pid, url: started.url };
      })();
      brokerTask = task;
      try {
        return await task;
      } finally {
        if (brokerTask === task) brokerTask = undefined;
      }
    },
    /** Adds an event listener (see startFleet); returns a function that removes it. */
    onEvent: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    /** Stops every service (SIGTERM, then SIGKILL after stopGraceMs), the broker and a private nats-server; cancels pending restarts. */
    stop,
  };
}

module.exports = { startFleet, freePort, builtServices, restartDelay, DEFAULT_BACKOFF, SERVICES, ROOT };
