// Starts a private nats-server with JetStream for one test run, benchmark or fleet, so its
// queue groups, streams and durable consumers never meet those of another fleet on the
// machine's shared server.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnLogged, stopChild } = require('./child');
const { accepting, freePort } = require('./ports');

/**
 * options: { port (default: a free one), storeDir (default: a new temp dir, removed on stop;
 *   a given one is kept, so its JetStream streams survive a restart on the same dir),
 *   onExit(code, signal): called when the server exits without stop() having been called,
 *   stopGraceMs (default 10000: SIGKILL after that), ownProcessGroup (default false: see spawnLogged) }
 * Resolves once the port accepts connections to { url, port, pid, storeDir, stop }.
 */
async function startNatsServer(options = {}) {
  const port = options.port || (await freePort());
  const ownDir = !options.storeDir;
  const storeDir = options.storeDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-nats-'));
  fs.mkdirSync(storeDir, { recursive: true });
  const bin = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';
  let stopping = false;
  const proc = spawnLogged(bin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], {
    ownProcessGroup: options.ownProcessGroup,
    onExit: (code, signal) => {
      if (!stopping) options.onExit?.(code, signal);
    },
  });

  const deadline = Date.now() + 10_000;
  while (!(await accepting(port))) {
    if (proc.exited() || Date.now() > deadline) {
      stopping = true;
      proc.child.kill('SIGKILL');
      throw new Error(`nats-server did not start on port ${port}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    pid: proc.child.pid,
    storeDir,
    stop: async () => {
      stopping = true;
      // SIGTERM: the server shuts down JetStream cleanly (streams are flushed to the store).
      await stopChild(proc, options.stopGraceMs ?? 10_000);
      if (ownDir) fs.rmSync(storeDir, { recursive: true, force: true });
    },
  };
}

module.exports = { startNatsServer };
