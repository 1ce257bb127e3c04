import { createPrismaClient } from '@fleet/db';
import { PrismaClient } from '../generated/prisma/client';

export type MeterDb = PrismaClient;
/** A client or the transaction client inside `$transaction`. */
export type MeterTx = Omit<PrismaClient, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;

/**
 * The meter's client. JIT is off: its queries are short index reads, and compiling one (tens of
 * milliseconds) costs more than running it once the planner's estimate crosses the JIT threshold.
 */
export function openMeterDb(databaseUrl: string, max = 10): MeterDb {
  return createPrismaClient(PrismaClient, databaseUrl, { max, startupOptions: '-c jit=off' });
}

/**
 * Advisory lock every ingest batch and every clear holds until it commits. Arrival sequence
 * numbers are therefore handed out in commit order, so a bookmark never skips a record that
 * commits later, and a clear cannot interleave with a batch.
 */
export const INGEST_LOCK_KEY = 72_707_410;
