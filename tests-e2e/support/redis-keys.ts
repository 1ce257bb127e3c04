import { Redis } from 'ioredis';
import { testEnv } from '@fleet/test-kit';

/** Removes every Redis key a fleet wrote under its REDIS_KEY_PREFIX. */
export async function deleteRedisKeysWithPrefix(prefix: string): Promise<void> {
  const redis = new Redis(testEnv.redisUrl);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      if (keys.length) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
