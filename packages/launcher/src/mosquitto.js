// Runs a Mosquitto 2.0 broker with the dynamic-security plugin as a child process: for the
// fleet launcher (`npm start`, end-to-end tests) and for tests that need broker credentials
// and ACLs. The machine's default broker (1883) is anonymous and has no plugin.
//
// Who may do what is decided only by the plugin. On first start the plugin file is created
// with `mosquitto_ctrl dynsec init` (admin client with the `admin` role: $CONTROL/dynamic-security/#,
// read $SYS/#). Before every start this module also makes sure the admin client holds the role
// `fleet-bridge`, which is what mqtt-bridge needs beyond the dynsec API: publish to device
// topics (`#`), and subscribe/unsubscribe to shared subscriptions, whose ACL is checked
// against the literal `$share/...` topic in Mosquitto 2.0.11. So mqtt-bridge uses one set of
// credentials (MQTT_ADMIN_USERNAME / MQTT_ADMIN_PASSWORD) for both its connections; it also
// ensures the same role itself on start, so a broker initialised elsewhere works too.
const { execFileSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { spawnLogged, stopChild } = require('./child');
const { accepting, freePort } = require('./ports');

const MOSQUITTO = process.env.MOSQUITTO_BIN ?? '/usr/sbin/mosquitto';
const MOSQUITTO_CTRL = process.env.MOSQUITTO_CTRL_BIN ?? 'mosquitto_ctrl';
const DYNSEC_PLUGIN = process.env.MOSQUITTO_DYNSEC_PLUGIN ?? '/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so';

/**
 * The bridge role and its ACLs, as the device protocol package defines them (mqtt-bridge ensures
 * the same on start). Read when a broker is started, not when this module loads: the staff CLI
 * loads the launcher before a fresh clone is built.
 */
const bridgeRole = () => {
  const { BRIDGE_ROLE, BRIDGE_ACLS } = require('@fleet/device-protocol');
  return { BRIDGE_ROLE, BRIDGE_ACLS };
};

function dynsecFile(dataDir) {
  return path.join(dataDir, 'dynamic-security.json');
}

/**
 * The admin password kept in `<dataDir>/admin-password` (mode 0600), generated on first use.
 * When the password file is missing but a plugin file exists, the plugin file is from an
 * unknown password and is removed, so the broker starts over with the new one.
 */
function loadOrCreateAdminPassword(dataDir) {
  fs.mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, 'admin-password');
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  const password = crypto.randomBytes(18).toString('base64url');
  fs.rmSync(dynsecFile(dataDir), { force: true });
  fs.writeFileSync(file, `${password}\n`, { mode: 0o600 });
  return password;
}

/** Adds the bridge role to the plugin file and gives it to the admin client (broker stopped). */
function ensureBridgeRole(file, adminUsername) {
  const { BRIDGE_ROLE, BRIDGE_ACLS } = bridgeRole();
  const config = JSON.parse(fs.readFileSync(file, 'utf8'));
  config.roles ??= [];
  config.clients ??= [];
  let role = config.roles.find((r) => r.rolename === BRIDGE_ROLE);
  if (!role) {
    role = { rolename: BRIDGE_ROLE, acls: [] };
    config.roles.push(role);
  }
  for (const acl of BRIDGE_ACLS) {
    if (!role.acls.some((a) => a.acltype === acl.acltype && a.topic === acl.topic)) role.acls.push({ ...acl });
  }
  const admin = config.clients.find((c) => c.username === adminUsername);
  if (!admin) throw new Error(`${file} has no client ${adminUsername}`);
  admin.roles ??= [];
  if (!admin.roles.some((r) => r.rolename === BRIDGE_ROLE)) admin.roles.push({ rolename: BRIDGE_ROLE });
  fs.writeFileSync(file, JSON.stringify(config, null, '\t'), { mode: 0o600 });
  fs.chmodSync(file, 0o600);
}

function writeConfig(dataDir, port) {
  const lines = [
    '# Written by the fleet launcher (packages/launcher/src/mosquitto.js); rewritten on every start.',
    'per_listener_settings false',
    'allow_anonymous false',
    `listener ${port} 127.0.0.1`,
    `plugin ${DYNSEC_PLUGIN}`,
    `plugin_opt_config_file ${dynsecFile(dataDir)}`,
    // Sessions, their plain subscriptions and queued messages survive a restart (saved on a
    // clean shutdown, and every autosave_interval seconds against a crash). The bridge's
    // backstop session relies on it (services/mqtt-bridge/README.md, docs/protocol.md).
    'persistence true',
    `persistence_location ${dataDir}${path.sep}`,
    'autosave_interval 5',
    // The bridge sessions absorb what devices send while no replica reads: the default queue
    // of 1000 messages per client would drop QoS 1 device traffic under load or during a gap.
    'max_queued_messages 1000000',
    'max_inflight_messages 1000',
    // A command is a small packet the device should have at once: without this, Nagle's
    // algorithm holds the rest of a message until the device's delayed ACK (about 40 ms).
    'set_tcp_nodelay true',
    'log_dest stderr',
    'log_type error',
    'log_type warning',
    'log_type notice',
    'log_type information',
    'connection_messages true',
    'log_timestamp_format %Y-%m-%dT%H:%M:%S',
  ];
  // Started as root, Mosquitto would drop to the `mosquitto` user, which cannot write a
  // data directory owned by the caller (the plugin rewrites its file on every change).
  if (typeof process.getuid === 'function' && process.getuid() === 0) lines.push('user root');
  const conf = path.join(dataDir, 'mosquitto.conf');
  fs.writeFileSync(conf, `${lines.join('\n')}\n`);
  return conf;
}

/**
 * Starts Mosquitto with the dynamic-security plugin on 127.0.0.1:<port> (a free port when
 * port is 0 or missing), keeping its config, plugin file, persistence and log in dataDir.
 * Resolves once the port accepts connections.
 * options: { port, dataDir, adminUsername = 'fleet-admin', adminPassword (default: kept in
 *   dataDir/admin-password), readyTimeoutMs = 10000, ownProcessGroup = false (see spawnLogged) }
 */
async function startDynsecBroker(options) {
  const dataDir = path.resolve(options.dataDir);
  fs.mkdirSync(dataDir, { recursive: true });
  const adminUsername = options.adminUsername ?? 'fleet-admin';
  const adminPassword = options.adminPassword ?? loadOrCreateAdminPassword(dataDir);
  const port = options.port || (await freePort());
  const file = dynsecFile(dataDir);
  if (!fs.existsSync(file)) {
    execFileSync(MOSQUITTO_CTRL, ['dynsec', 'init', file, adminUsername, adminPassword], { stdio: 'ignore' });
  }
  ensureBridgeRole(file, adminUsername);
  const conf = writeConfig(dataDir, port);
  const logFile = path.join(dataDir, 'mosquitto.log');
  const proc = spawnLogged(MOSQUITTO, ['-c', conf], { logFile, ownProcessGroup: options.ownProcessGroup });

  const stop = () => stopChild(proc, 5000);

  const deadline = Date.now() + (options.readyTimeoutMs ?? 10_000);
  for (;;) {
    if (proc.exited()) throw new Error(`mosquitto exited during start; see ${logFile}`);
    if (await accepting(port)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`mosquitto did not listen on ${port}; see ${logFile}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url: `mqtt://127.0.0.1:${port}`, port, adminUsername, adminPassword, pid: proc.child.pid, dataDir, logFile, stop };
}

module.exports = { startDynsecBroker, loadOrCreateAdminPassword };
