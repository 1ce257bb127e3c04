import { dropDatabasesWithPrefix } from '@fleet/test-kit';
import { e2eFleet } from './fleet-env';
import { deleteRedisKeysWithPrefix } from './redis-keys';

/** Stops the fleet and removes what the run left in Postgres and Redis. */
export default async function globalTeardown(): Promise<void> {
  const fleet = (globalThis as Record<string, unknown>).__E2E_FLEET__ as { stop(): Promise<void> } | undefined;
  if (!fleet) return;
  await fleet.stop();
  const { databasePrefix, redisPrefix } = e2eFleet();
  await dropDatabasesWithPrefix(databasePrefix);
  await deleteRedisKeysWithPrefix(redisPrefix);
}
