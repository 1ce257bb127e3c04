import { createPrismaClient } from '@fleet/db';
import { PrismaClient } from '../generated/prisma/client';

export type RegistryDb = PrismaClient;
/** A client or the transaction client inside `$transaction`. */
export type RegistryTx = Omit<PrismaClient, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;

export function openRegistryDb(databaseUrl: string, max = 10): RegistryDb {
  return createPrismaClient(PrismaClient, databaseUrl, { max });
}
