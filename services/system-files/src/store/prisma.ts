import { createPrismaClient } from '@fleet/db';
import { PrismaClient } from '../generated/prisma/client';

export type SystemDb = PrismaClient;
/** A client or the transaction client inside `$transaction`. */
export type SystemTx = Omit<PrismaClient, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;

export function openSystemDb(databaseUrl: string, max = 10): SystemDb {
  return createPrismaClient(PrismaClient, databaseUrl, { max });
}

/**
 * Advisory lock every response-feed insert holds until it commits: feed ids are then handed
 * out in commit order, so a reader's cursor never passes a row that commits later.
 */
export const FEED_LOCK_KEY = 72_707_511;
