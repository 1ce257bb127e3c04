// A broker or server process the launcher starts: spawned with its output in a log file (or
// none), with whether it has exited and a promise of its exit, so start-up can notice a process
// that died and stop() can wait for it.
const fs = require('node:fs');
const { spawn } = require('node:child_process');

/**
 * Spawns `command` with stdout and stderr appended to `logFile` (ignored without one).
 * `ownProcessGroup`: the process gets a process group of its own, so a terminal's Ctrl-C (sent
 * to the whole foreground group) does not reach it and its owner decides when it stops; the
 * owner must then make sure it never outlives it.
 * Returns { child, exited(), whenExited } ; `onExit(code, signal)` is called once it exits.
 */
function spawnLogged(command, args, { logFile, env, cwd, onExit, ownProcessGroup = false } = {}) {
  const log = logFile ? fs.openSync(logFile, 'a') : 'ignore';
  const child = spawn(command, args, { stdio: ['ignore', log, log], detached: ownProcessGroup, ...(env ? { env } : {}), ...(cwd ? { cwd } : {}) });
  if (typeof log === 'number') fs.closeSync(log);
  let exited = false;
  const whenExited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      exited = true;
      resolve();
      onExit?.(code, signal);
    });
  });
  // A command that cannot be started at all emits 'error' and never 'exit'.
  child.once('error', () => {
    exited = true;
  });
  return { child, exited: () => exited, whenExited };
}

/** SIGTERM, then SIGKILL after graceMs; resolves once the process has exited. */
async function stopChild(proc, graceMs) {
  if (proc.exited()) return;
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), graceMs);
  proc.child.kill('SIGTERM');
  await proc.whenExited;
  clearTimeout(timer);
}

/** Whether a process with this pid exists (signal 0 checks without touching it). */
function isRunning(pid) {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

module.exports = { spawnLogged, stopChild, isRunning };
