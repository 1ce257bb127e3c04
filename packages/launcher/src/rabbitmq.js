// Runs a private RabbitMQ 3.10 node as an MQTT 3.1.1 broker, as a child process: to verify the
// broker authentication hook end to end (RabbitMQ's rabbitmq_auth_backend_http plugin asks the
// hook about every login, vhost, queue/exchange and topic), and, with no hook, as the benchmarks'
// anonymous baseline.
//
// The machine's RabbitMQ (rabbit@localhost, AMQP on 5672, /etc/rabbitmq, /var/lib/rabbitmq) is
// never touched. This node has a name of its own, and everything it writes lives in dataDir:
//   node-name        the node's name, kept so that a later start finds its mnesia directory
//                    (RabbitMQ names that directory, and records in it, after the node)
//   .erlang.cookie   HOME is dataDir for the node and for rabbitmqctl, so both read this one
//   rabbitmq-env.conf  empty: the scripts would otherwise source /etc/rabbitmq/rabbitmq-env.conf,
//                    whose NODENAME and ERL_FLAGS belong to the system node
//   rabbitmq.conf, advanced.config, enabled_plugins   rewritten on every start
//   mnesia/          the node's database, feature flags, retained messages (kept across restarts)
//   log/             the node's log (<node>.log) and the start script's output (startup.log)
// Only epmd (4369) is shared with the system node, which is what epmd is for.
const { execFile } = require('node:child_process');
const { isRunning, spawnLogged } = require('./child');
const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { accepting, freePort } = require('./ports');

// The scripts under /usr/lib/rabbitmq/bin, not /usr/sbin: the Debian wrappers in /usr/sbin cd to
// /var/lib/rabbitmq and `su rabbitmq` when run as root, so the node would neither run as the
// caller nor be able to write a data directory the caller owns.
const RABBITMQ_BIN = process.env.RABBITMQ_BIN_DIR ?? '/usr/lib/rabbitmq/bin';
const PLUGINS = ['rabbitmq_mqtt', 'rabbitmq_auth_backend_http'];
const STOP_GRACE_MS = 30_000;

/** The node name kept in dataDir, or a new unique one (saved there) on first use. */
function loadOrCreateNodeName(dataDir) {
  const file = path.join(dataDir, 'node-name');
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  const name = `fleet-${crypto.randomBytes(5).toString('hex')}@localhost`;
  fs.writeFileSync(file, `${name}\n`);
  return name;
}

/** The Erlang cookie in dataDir (HOME of the node and of rabbitmqctl), created on first use. */
function ensureCookie(dataDir) {
  const file = path.join(dataDir, '.erlang.cookie');
  if (fs.existsSync(file)) return;
  // Erlang refuses a cookie file that others can read.
  fs.writeFileSync(file, crypto.randomBytes(20).toString('hex').toUpperCase(), { mode: 0o400 });
}

function writeConfig(dataDir, mqttPort, hookBaseUrl) {
  const lines = [
    '# Written by the fleet launcher (packages/launcher/src/rabbitmq.js); rewritten on every start.',
    // MQTT only: no AMQP listener to collide with the system node's 5672 or another private node.
    'listeners.tcp = none',
    `mqtt.listeners.tcp.default = 127.0.0.1:${mqttPort}`,
    // Where MQTT lives in AMQP terms: MQTT topics are routing keys on amq.topic in vhost "/"
    // (with `/` mapped to `.`), which is what the hook is asked about.
    'mqtt.vhost = /',
    'mqtt.exchange = amq.topic',
  ];
  if (hookBaseUrl) {
    const base = hookBaseUrl.replace(/\/+$/, '');
    lines.push(
      // The hook alone decides: the internal user database (guest) is not consulted.
      'auth_backends.1 = http',
      'auth_http.http_method = post',
      `auth_http.user_path = ${base}/mqtt/rabbitmq/user`,
      `auth_http.vhost_path = ${base}/mqtt/rabbitmq/vhost`,
      `auth_http.resource_path = ${base}/mqtt/rabbitmq/resource`,
      `auth_http.topic_path = ${base}/mqtt/rabbitmq/topic`,
      // The plugin's default is to wait for ever: a hook that hangs would hang every CONNECT.
      'auth_http.connection_timeout = 5000',
      'auth_http.request_timeout = 5000',
      'mqtt.allow_anonymous = false',
    );
  } else {
    lines.push(
      // The baseline: a client with no credentials logs in as guest, which may do anything in "/".
      'mqtt.allow_anonymous = true',
      'mqtt.default_user = guest',
      'mqtt.default_pass = guest',
      'default_user = guest',
      'default_pass = guest',
      'loopback_users = none',
    );
  }
  lines.push(
    // Everything goes to <logDir>/<node>.log; the console would copy it into startup.log.
    'log.console = false',
    'log.file.level = info',
  );
  const conf = path.join(dataDir, 'rabbitmq.conf');
  fs.writeFileSync(conf, `${lines.join('\n')}\n`);
  // A username with a colon would otherwise be read as `vhost:username` (rabbitmq.conf has no key
  // for this setting in 3.10).
  const advanced = path.join(dataDir, 'advanced.config');
  fs.writeFileSync(advanced, '[{rabbitmq_mqtt, [{ignore_colons_in_username, true}]}].\n');
  const plugins = path.join(dataDir, 'enabled_plugins');
  fs.writeFileSync(plugins, `[${PLUGINS.join(',')}].\n`);
  const confEnv = path.join(dataDir, 'rabbitmq-env.conf');
  fs.writeFileSync(confEnv, '# Empty on purpose: keeps /etc/rabbitmq/rabbitmq-env.conf (the system node\'s) out.\n');
  return { conf, advanced, plugins, confEnv };
}

/** The environment of the node's scripts and of rabbitmqctl for this node. */
function nodeEnv(node, distPort) {
  const env = {
    ...process.env,
    HOME: node.dataDir,
    RABBITMQ_CONF_ENV_FILE: node.files.confEnv,
    RABBITMQ_NODENAME: node.nodeName,
    RABBITMQ_USE_LONGNAME: 'false',
    RABBITMQ_MNESIA_BASE: path.join(node.dataDir, 'mnesia'),
    RABBITMQ_LOG_BASE: node.logDir,
    RABBITMQ_CONFIG_FILE: node.files.conf,
    RABBITMQ_ADVANCED_CONFIG_FILE: node.files.advanced,
    RABBITMQ_ENABLED_PLUGINS_FILE: node.files.plugins,
    RABBITMQ_PID_FILE: node.pidFile,
    ERL_CRASH_DUMP: path.join(node.logDir, 'erl_crash.dump'),
  };
  // Variables of the caller's shell that would point this node at another one's files.
  for (const name of ['RABBITMQ_MNESIA_DIR', 'RABBITMQ_LOGS', 'RABBITMQ_CONFIG_FILES', 'RABBITMQ_FEATURE_FLAGS_FILE',
    'RABBITMQ_PLUGINS_EXPAND_DIR', 'RABBITMQ_QUORUM_DIR', 'RABBITMQ_STREAM_DIR', 'RABBITMQ_ERLANG_COOKIE', 'ERL_FLAGS']) {
    delete env[name];
  }
  if (distPort) {
    env.RABBITMQ_DIST_PORT = String(distPort);
    // Inter-node (and rabbitmqctl) traffic on loopback only, like the system node's.
    env.RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS = '-kernel inet_dist_use_interface {127,0,0,1}';
  }
  return env;
}

/**
 * Whether an MQTT 3.1.1 CONNECT with no credentials gets a CONNACK from 127.0.0.1:<port>, and
 * which: resolves to its return code, or null (no answer in time, connection closed).
 * A raw packet rather than an MQTT client: the launcher has no MQTT dependency.
 */
function connackCode(port, timeoutMs = 3000) {
  return new Promise((resolve) => {
    const clientId = Buffer.from(`fleet-ready-${crypto.randomBytes(4).toString('hex')}`);
    const variable = Buffer.from([0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x04, 0x02, 0x00, 0x0a]); // "MQTT", v4, clean session, keepalive 10 s
    const payload = Buffer.concat([Buffer.from([0x00, clientId.length]), clientId]);
    const connect = Buffer.concat([Buffer.from([0x10, variable.length + payload.length]), variable, payload]);
    const socket = net.connect({ port, host: '127.0.0.1' });
    let received = Buffer.alloc(0);
    let done = false;
    const finish = (code) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.removeAllListeners('data');
      // DISCONNECT, so the broker logs a clean close rather than an abrupt one.
      if (code === 0) socket.end(Buffer.from([0xe0, 0x00]));
      else socket.destroy();
      resolve(code);
    };
    const timer = setTimeout(() => finish(null), timeoutMs);
    socket.once('connect', () => socket.write(connect));
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 4) return;
      finish(received[0] === 0x20 && received[1] === 0x02 ? received[3] : null);
    });
    socket.once('error', () => finish(null));
    socket.once('close', () => finish(null));
  });
}


/** The Erlang VM's pid, from the pid file the node writes as it boots. */
function readPid(pidFile) {
  try {
    const pid = Number(fs.readFileSync(pidFile, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function lastLines(file, count = 15) {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-count).join('\n');
  } catch {
    return '';
  }
}

/** Waits until the pid is gone, SIGKILLs it after graceMs; resolves once it is gone. */
async function waitGone(pid, graceMs) {
  const deadline = Date.now() + graceMs;
  while (isRunning(pid)) {
    if (Date.now() > deadline) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Starts the node once: the start script as a child (it runs the VM as its own child and, on
 * SIGTERM, stops the VM cleanly and waits for it), then waits for MQTT CONNECTs to be answered.
 * Resolves to { pid, stop }.
 */
async function startNode(node, readyTimeoutMs) {
  const distPort = await freePort();
  fs.rmSync(node.pidFile, { force: true });
  const startupLog = path.join(node.logDir, 'startup.log');
  fs.appendFileSync(startupLog, `--- ${new Date().toISOString()} starting ${node.nodeName} (MQTT ${node.port}, dist ${distPort})\n`);
  const proc = spawnLogged(path.join(RABBITMQ_BIN, 'rabbitmq-server'), [], { logFile: startupLog, cwd: node.dataDir, env: nodeEnv(node, distPort) });
  const { child } = proc;
  let vmPid;
  // The VM outlives this process if it exits without stop() (a test that crashes): kill it then.
  const killOnExit = () => {
    const pid = vmPid ?? readPid(node.pidFile);
    if (isRunning(pid)) process.kill(pid, 'SIGKILL');
  };
  process.once('exit', killOnExit);

  const stop = async () => {
    process.removeListener('exit', killOnExit);
    vmPid ??= readPid(node.pidFile);
    if (!proc.exited()) {
      const timer = setTimeout(() => {
        if (isRunning(vmPid)) process.kill(vmPid, 'SIGKILL');
        child.kill('SIGKILL');
      }, STOP_GRACE_MS);
      child.kill('SIGTERM');
      await proc.whenExited;
      clearTimeout(timer);
    }
    // The script waits for the VM, but a script killed by someone else leaves it running.
    if (vmPid) await waitGone(vmPid, STOP_GRACE_MS);
  };

  const fail = async (reason) => {
    await stop();
    const logFile = path.join(node.logDir, `${node.nodeName}.log`);
    throw new Error(`${reason}; see ${logFile} and ${startupLog}:\n${lastLines(startupLog)}`);
  };
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (proc.exited()) return fail(`RabbitMQ node ${node.nodeName} exited during start`);
    // Every CONNACK but "server unavailable" (3) is the broker's own answer: 0 for the anonymous
    // baseline, 4 (no credentials) with a hook, which is not even asked.
    if (await accepting(node.port)) {
      const code = await connackCode(node.port);
      if (code !== null && code !== 3) break;
    }
    if (Date.now() > deadline) return fail(`RabbitMQ node ${node.nodeName} did not answer MQTT on ${node.port} within ${readyTimeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
  vmPid = readPid(node.pidFile);
  return { pid: vmPid, stop };
}

/** Runs rabbitmqctl against this node (same HOME, so the same cookie); resolves to its stdout. */
function rabbitmqctl(node, args, timeoutMs = 30_000) {
  return new Promise((resolve, reject) => {
    execFile(path.join(RABBITMQ_BIN, 'rabbitmqctl'), ['-n', node.nodeName, ...args], {
      cwd: node.dataDir,
      env: nodeEnv(node),
      timeout: timeoutMs,
    }, (error, stdout, stderr) => (error ? reject(Object.assign(error, { stdout, stderr })) : resolve(stdout)));
  });
}

/**
 * Starts a private RabbitMQ node whose only listener is MQTT on 127.0.0.1:<mqttPort> (a free port
 * when 0 or missing), its files in dataDir. With hookBaseUrl, logins and permissions are asked of
 * <hookBaseUrl>/mqtt/rabbitmq/{user,vhost,resource,topic} (form-encoded POSTs answered `allow` or
 * `deny`) and anonymous MQTT is refused; without it, anyone connects with no credentials.
 * Resolves once an MQTT CONNECT is answered (a first start takes about 10 s, a restart about 5).
 * options: { dataDir, mqttPort, hookBaseUrl, readyTimeoutMs = 60000 }
 * restart() stops the node and starts it again on the same port, name and data (mnesia kept).
 */
async function startRabbitMqttBroker(options) {
  if (!options?.dataDir) throw new Error('startRabbitMqttBroker: dataDir is required');
  const dataDir = path.resolve(options.dataDir);
  const logDir = path.join(dataDir, 'log');
  fs.mkdirSync(logDir, { recursive: true });
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const nodeName = loadOrCreateNodeName(dataDir);
  ensureCookie(dataDir);
  const port = options.mqttPort || (await freePort());
  const files = writeConfig(dataDir, port, options.hookBaseUrl);
  const node = { dataDir, logDir, nodeName, port, files, pidFile: path.join(dataDir, 'mnesia', `${nodeName}.pid`) };

  let current = await startNode(node, readyTimeoutMs);
  let stopping = Promise.resolve();
  // A second stop() while the first is under way waits for the same one.
  const stop = async () => {
    const running = current;
    current = undefined;
    if (running) stopping = running.stop();
    await stopping;
  };
  const restart = async () => {
    await stop();
    current = await startNode(node, readyTimeoutMs);
  };
  return {
    url: `mqtt://127.0.0.1:${port}`,
    port,
    nodeName,
    dataDir,
    logDir,
    logFile: path.join(logDir, `${nodeName}.log`),
    /** The Erlang VM's pid while the node runs (it changes on restart). */
    get pid() {
      return current?.pid;
    },
    rabbitmqctl: (...args) => rabbitmqctl(node, args),
    stop,
    restart,
  };
}

module.exports = { startRabbitMqttBroker };
