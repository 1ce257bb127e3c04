import { Redis } from 'ioredis';
import { dropDatabasesWithPrefix, testEnv } from '@fleet/test-kit';
import { e2eFleet } from './fleet-env';

/** Stops the fleet and removes what the run left in Postgres and Redis. */
export default async function globalTeardown(): Promise<void> {
  const fleet = (globalThis as Record<string, unknown>).__E2E_FLEET__ as { stop(): Promise<void> } | undefined;
  if (!fleet) return;
  await fleet.stop();
  const { databasePrefix, redisPrefix } = e2eFleet();
  await dropDatabasesWithPrefix(databasePrefix);
  const redis = new Redis(testEnv.redisUrl);
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisPrefix}*`, 'COUNT', 1000);
    if (keys.length) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  redis.disconnect();
}
