import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { freePort } from '@fleet/launcher';
import { waitFor } from '@fleet/test-kit';
import { e2eFleet } from './fleet-env';
import { databaseUrl } from '@fleet/test-kit';

const ROOT = path.resolve(__dirname, '../..');

/** A second gateway process beside the suite's fleet, sharing its databases, with its own settings. */
export async function startExtraGateway(env: Record<string, string>): Promise<{ port: number; stop(): Promise<void>; child: ChildProcess }> {
  const fleet = e2eFleet();
  const port = await freePort();
  const healthPort = await freePort();
  const child = spawn(process.execPath, [path.join(ROOT, 'services/gateway/dist/main.js')], {
    env: {
      ...process.env,
      GATEWAY_PORT: String(port),
      GATEWAY_HOST: '127.0.0.1',
      HEALTH_PORT: String(healthPort),
      DATABASE_URL: databaseUrl(`${fleet.databasePrefix}gateway`),
      REDIS_KEY_PREFIX: fleet.redisPrefix,
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`gateway exited with ${child.exitCode}`);
      return (await fetch(`http://127.0.0.1:${healthPort}/readyz`)).ok;
    },
    { timeoutMs: 20_000, what: 'the extra gateway to be ready' },
  );
  return {
    port,
    child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
