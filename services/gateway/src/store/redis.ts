import { Redis } from 'ioredis';

/**
 * The longest a Redis command may take before it fails (the request is then 503, as for a
 * Redis that is down). A Redis that accepts connections but does not answer (a paused process,
 * a partition) would otherwise leave every request waiting: each one spends from a rate-limit
 * window first. Commands take well under a millisecond when Redis is well.
 */
export const REDIS_COMMAND_TIMEOUT_MS = 2000;

/**
 * The gateway's Redis client. Auto-pipelining sends the commands of concurrent requests in one
 * write: every request spends from a Redis rate-limit window, so this is the gateway's hottest
 * path. No offline queue: while Redis is away a command fails at once. Call connect() before use.
 */
export function openGatewayRedis(url: string): Redis {
  return new Redis(url, {
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    lazyConnect: true,
    enableAutoPipelining: true,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
  });
}
