import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort, isRunning } from '@fleet/launcher';
import { dropDatabasesWithPrefix, testEnv, uniqueId, waitFor } from '@fleet/test-kit';

// `npm start` keeps the fleet up: a service killed outright is started again on the same
// health port while the other services, the broker and the gateway keep answering, and
// Ctrl-C still stops every process. This runs a second fleet of its own (`node
// scripts/fleet.js` on free ports, its own data directory, databases, Redis keys and
// nats-server), so the suite's shared fleet is not touched.

const ROOT = path.resolve(__dirname, '..');

interface FleetState {
  pid: number;
  mqttPid: number;
  natsPid: number | null;
  services: { name: string; replica: number; instance: string; pid: number | null; healthPort: number; state: string; restarts: number }[];
}

const run = uniqueId('sup');
const dataDir = path.join(ROOT, '.fleet', 'supervisor', run);
const stateFile = path.join(dataDir, 'fleet.json');
const databasePrefix = `fleet_${run}_`;
const redisPrefix = `${run}:`;
let launcher: ChildProcess | undefined;
let output = '';
/** Every pid the test saw belonging to its fleet, so that cleanup can make sure none survives. */
const seenPids = new Set<number>();

function readState(): FleetState {
  const state = JSON.parse(fs.readFileSync(stateFile, 'utf8')) as FleetState;
  for (const pid of [state.pid, state.mqttPid, state.natsPid, ...state.services.map((s) => s.pid)]) if (pid) seenPids.add(pid);
  return state;
}

/** How the process ended, or 'timeout' when it is still running after ms. */
function exitWithin(child: ChildProcess, ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null } | 'timeout'> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('timeout'), ms);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

afterAll(async () => {
  if (launcher && launcher.exitCode === null && launcher.signalCode === null) {
    launcher.kill('SIGINT');
    if ((await exitWithin(launcher, 15_000)) === 'timeout') launcher.kill('SIGKILL');
  }
  for (const pid of seenPids) if (isRunning(pid)) process.kill(pid, 'SIGKILL');
  await dropDatabasesWithPrefix(databasePrefix);
  const redis = new Redis(testEnv.redisUrl);
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisPrefix}*`, 'COUNT', 1000);
    if (keys.length) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  redis.disconnect();
  fs.rmSync(dataDir, { recursive: true, force: true });
}, 30_000);

it('restarts a killed service while the rest of the fleet keeps answering, and Ctrl-C stops everything', async () => {
  const gatewayPort = await freePort();
  const mqttPort = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GATEWAY_PORT: String(gatewayPort),
    MQTT_PORT: String(mqttPort),
    FLEET_DATA_DIR: dataDir,
    FLEET_DATABASE_PREFIX: databasePrefix,
    FLEET_PRIVATE_NATS: '1',
    REDIS_KEY_PREFIX: redisPrefix,
    LOG_LEVEL: 'warn',
    NODE_ENV: 'test',
  };
  for (const name of ['NODE_OPTIONS', 'MQTT_PUBLIC_URL', 'FLEET_SUPERVISE', 'FLEET_REPLICAS', 'SERVICE_INSTANCE']) delete env[name];
  // detached: the launcher leads a process group of its own, as a shell job does, so Ctrl-C
  // below can be sent the way a terminal sends it: to the whole group.
  const child = spawn(process.execPath, [path.join(ROOT, 'scripts', 'fleet.js')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  launcher = child;
  seenPids.add(child.pid as number);
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));

  const ready = await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`the launcher exited: ${output}`);
    return /^ready: gateway=(\S+) mqtt=(\S+)$/m.exec(output) ?? undefined;
  }, { timeoutMs: 40_000, intervalMs: 100, what: `ready: in the launcher's output (so far: ${output})` });
  expect(ready[1]).toBe(`http://127.0.0.1:${gatewayPort}`);
  expect(ready[2]).toBe(`mqtt://127.0.0.1:${mqttPort}`);
  expect(output).toContain('npm run -s admin -- partner create --name "Acme"');
  // Each service's health and metrics URL is printed; the metrics answer Prometheus text.
  const metricsUrls = [...output.matchAll(/^\s+(\S+)\s+health (\S+)\s+metrics (\S+)$/gm)];
  expect(metricsUrls.map((m) => m[1]).sort()).toEqual(readState().services.map((s) => s.instance).sort());
  for (const [, instance, , url] of metricsUrls) {
    const text = await (await fetch(url as string)).text();
    expect({ instance, process: /^process_cpu_user_seconds_total\{/m.test(text) }).toEqual({ instance, process: true });
  }

  const before = readState();
  expect(before.pid).toBe(child.pid);
  expect(before.services.every((s) => s.state === 'ready' && s.pid)).toBe(true);
  const victim = before.services.find((s) => s.name === 'light-command');
  if (!victim?.pid) throw new Error('light-command is not in the fleet');
  const oldPid = victim.pid;

  // The gateway answers throughout: a request without a key is 401 from the gateway alone.
  const answers: (number | string)[] = [];
  let polling = true;
  const poller = (async () => {
    while (polling) {
      try {
        const res = await fetch(`${ready[1]}/v1/account`, { signal: AbortSignal.timeout(2000) });
        await res.arrayBuffer();
        answers.push(res.status);
      } catch (err) {
        answers.push(`${(err as Error).message} ${String((err as { cause?: unknown }).cause ?? '')}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  await waitFor(() => answers.length >= 3, { timeoutMs: 5000, what: 'the first gateway answers' });

  process.kill(oldPid, 'SIGKILL');
  await waitFor(() => output.includes(`light-command (pid ${oldPid}) exited unexpectedly with signal SIGKILL; restart attempt 1 in 0.5 s; log: ${path.join(dataDir, 'logs', 'light-command.log')}`), {
    timeoutMs: 5000,
    what: `the restart line (output: ${output})`,
  });
  const restarted = await waitFor(() => {
    const s = readState().services.find((x) => x.name === 'light-command');
    return s && s.pid && s.pid !== oldPid && s.state === 'ready' ? s : undefined;
  }, { timeoutMs: 20_000, intervalMs: 100, what: 'light-command ready again with a new pid' });
  expect(restarted.healthPort).toBe(victim.healthPort);
  expect(restarted.restarts).toBe(1);
  expect(isRunning(oldPid)).toBe(false);
  expect(isRunning(restarted.pid as number)).toBe(true);
  const readyz = await fetch(`http://127.0.0.1:${victim.healthPort}/readyz`);
  expect([readyz.status, ((await readyz.json()) as { status: string }).status]).toEqual([200, 'ready']);
  expect(output).toContain(`light-command ready (pid ${restarted.pid}, health port ${victim.healthPort}, restart 1)`);

  // Keep polling a little past the restart, then check that nothing else moved.
  const seen = answers.length;
  await waitFor(() => answers.length >= seen + 5, { timeoutMs: 5000, what: 'gateway answers after the restart' });
  polling = false;
  await poller;
  expect(answers.filter((a) => a !== 401)).toEqual([]);

  const after = readState();
  for (const s of before.services.filter((x) => x.name !== 'light-command')) {
    const now = after.services.find((x) => x.name === s.name && x.replica === s.replica);
    expect({ name: s.name, pid: now?.pid, restarts: now?.restarts }).toEqual({ name: s.name, pid: s.pid, restarts: 0 });
    expect(isRunning(s.pid as number)).toBe(true);
  }
  expect([after.mqttPid, after.natsPid]).toEqual([before.mqttPid, before.natsPid]);

  // Ctrl-C, as a terminal sends it (SIGINT to the launcher's whole process group): every
  // process of the fleet ends and the launcher exits 0.
  const fleetPids = [restarted.pid as number, ...before.services.filter((s) => s.name !== 'light-command').map((s) => s.pid as number), before.mqttPid, before.natsPid as number];
  const stoppedAt = Date.now();
  process.kill(-(child.pid as number), 'SIGINT');
  const end = await exitWithin(child, 20_000);
  expect(end).toEqual({ code: 0, signal: null });
  expect(Date.now() - stoppedAt).toBeLessThan(20_000);
  expect(fleetPids.filter(isRunning)).toEqual([]);
  expect(fs.existsSync(stateFile)).toBe(false);
  // The one crash was the only unexpected exit; stopping restarted nothing.
  expect(output.match(/exited unexpectedly/g)).toHaveLength(1);
  expect(output).toContain('SIGINT: stopping the fleet');
  expect(output.trimEnd().split('\n').at(-1)).toBe('stopped: every process the fleet started has exited');
  // The broker and nats-server are not in that group: they stop after the services have
  // drained, so no service logs a lost connection (or anything else) while stopping.
  expect(warningsLoggedSince(stoppedAt)).toEqual([]);
}, 60_000);

/** Warning and error lines (pino level 40 and up) the services logged at or after `since` (epoch ms). */
function warningsLoggedSince(since: number): string[] {
  const logDir = path.join(dataDir, 'logs');
  return fs
    .readdirSync(logDir)
    .filter((file) => file.endsWith('.log'))
    .flatMap((file) =>
      fs
        .readFileSync(path.join(logDir, file), 'utf8')
        .split('\n')
        .filter((line) => {
          let entry: { level?: number; time?: string };
          try {
            entry = JSON.parse(line) as typeof entry;
          } catch {
            return false; // not a log entry (a crash shows in the exit checks above)
          }
          return (entry.level ?? 0) >= 40 && Date.parse(entry.time ?? '') >= since;
        })
        .map((line) => `${file}: ${line}`),
    );
}
