import { createPrismaClient } from '@fleet/db';
import { PrismaClient } from '../generated/prisma/client';

export type GatewayDb = PrismaClient;

/**
 * How long the gateway waits for its database: a key lookup or a staff command's query takes
 * milliseconds. A database that stalls makes a request whose key is not cached a 503 after this
 * long rather than a request left waiting.
 */
export const DATABASE_WAIT_MS = 3000;

export function openGatewayDb(databaseUrl: string): GatewayDb {
  return createPrismaClient(PrismaClient, databaseUrl, { max: 10, connectionTimeoutMs: DATABASE_WAIT_MS, queryTimeoutMs: DATABASE_WAIT_MS });
}
