// Starts a private nats-server with JetStream for one test run, benchmark or fleet, so its
// queue groups, streams and durable consumers never meet those of another fleet on the
// machine's shared server.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { accepting, freePort } = require('./ports');

/**
 * options: { port (default: a free one), storeDir (default: a new temp dir, removed on stop;
 *   a given one is kept, so its JetStream streams survive a restart on the same dir),
 *   onExit(code, signal): called when the server exits without stop() having been called,
 *   stopGraceMs (default 10000: SIGKILL after that) }
 * Resolves once the port accepts connections to { url, port, pid, storeDir, stop }.
 */
async function startNatsServer(options = {}) {
  const port = options.port || (await freePort());
  const ownDir = !options.storeDir;
  const storeDir = options.storeDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-nats-'));
  fs.mkdirSync(storeDir, { recursive: true });
  const bin = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';
  const child = spawn(bin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], { stdio: 'ignore' });
  let stopping = false;
  let exited = false;
  const exitPromise = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      exited = true;
      resolve();
      if (!stopping) options.onExit?.(code, signal);
    });
  });
  child.once('error', () => {
    exited = true;
  });

  const deadline = Date.now() + 10_000;
  while (!(await accepting(port))) {
    if (exited || Date.now() > deadline) {
      stopping = true;
      child.kill('SIGKILL');
      throw new Error(`nats-server did not start on port ${port}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    pid: child.pid,
    storeDir,
    stop: async () => {
      stopping = true;
      if (!exited) {
        // SIGTERM: the server shuts down JetStream cleanly (streams are flushed to the store).
        const timer = setTimeout(() => child.kill('SIGKILL'), options.stopGraceMs ?? 10_000);
        child.kill('SIGTERM');
        await exitPromise;
        clearTimeout(timer);
      }
      if (ownDir) fs.rmSync(storeDir, { recursive: true, force: true });
    },
  };
}

module.exports = { startNatsServer };
