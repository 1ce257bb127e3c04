// Starts a private nats-server with JetStream for one test run or benchmark, so its queue
// groups, streams and durable consumers never meet those of another fleet on the machine's
// shared server.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { accepting, freePort } = require('./ports');

/** options: { port (default: a free one), storeDir (default: a new temp dir, removed on stop) } */
async function startNatsServer(options = {}) {
  const port = options.port || (await freePort());
  const ownDir = !options.storeDir;
  const storeDir = options.storeDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-nats-'));
  fs.mkdirSync(storeDir, { recursive: true });
  const bin = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';
  const child = spawn(bin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], { stdio: 'ignore' });
  const deadline = Date.now() + 10_000;
  while (!(await accepting(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`nats-server did not start on port ${port}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    pid: child.pid,
    stop: () =>
      new Promise((resolve) => {
        const done = () => {
          if (ownDir) fs.rmSync(storeDir, { recursive: true, force: true });
          resolve();
        };
        if (child.exitCode !== null) return done();
        child.once('exit', done);
        child.kill('SIGTERM');
      }),
  };
}

module.exports = { startNatsServer };
