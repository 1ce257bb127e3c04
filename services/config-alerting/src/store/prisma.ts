import { createPrismaClient } from '@fleet/db';
import { PrismaClient } from '../generated/prisma/client';

export type ConfigDb = PrismaClient;
/** A client or the transaction client inside `$transaction`. */
export type ConfigTx = Omit<PrismaClient, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;

/**
 * JIT compilation is off for this service's connections: the evaluation's queries are planned
 * as costly (thousands of index scans), so the server compiled each one for about 0.6 s, longer
 * than running it (about 0.4 s for a shard of 3,000 sensors; bench/README.md, alerting).
 */
export function openConfigDb(databaseUrl: string, max = 10): ConfigDb {
  return createPrismaClient(PrismaClient, databaseUrl, { max, startupOptions: '-c jit=off' });
}
