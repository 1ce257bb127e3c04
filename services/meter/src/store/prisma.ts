import { createPreparedReader, createPrismaClient, type PreparedReader } from '@fleet/db';
import { PrismaClient } from '../generated/prisma/client';

export type MeterDb = PrismaClient;
/** A client or the transaction client inside `$transaction`. */
export type MeterTx = Omit<PrismaClient, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;
/**
 * What the partner reads (pages by start time, summaries, energy) need: the service's prepared
 * reader (openMeterReader) or, in tests, a Prisma client. Numbers come back as text from the one
 * and as bigint from the other: readers convert with Number().
 */
export type MeterReader = Pick<PreparedReader, '$queryRawUnsafe'>;

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
/**
 * The reader of the partner reads: node-postgres with prepared statements (their plans are
 * kept, where Prisma plans every query anew), on the primary or on DATABASE_READ_URL.
 */
export function openMeterReader(databaseUrl: string, max = 10): PreparedReader {
  return createPreparedReader(databaseUrl, { max, startupOptions: '-c jit=off' });
}

export const INGEST_LOCK_KEY = 72_707_410;
