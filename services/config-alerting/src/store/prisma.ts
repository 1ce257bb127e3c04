import { createPrismaClient } from '@fleet/db';
import { PrismaClient } from '../generated/prisma/client';

export type ConfigDb = PrismaClient;
/** A client or the transaction client inside `$transaction`. */
export type ConfigTx = Omit<PrismaClient, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;

export function openConfigDb(databaseUrl: string, max = 10): ConfigDb {
  return createPrismaClient(PrismaClient, databaseUrl, { max });
}
