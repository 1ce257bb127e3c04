import { createPrismaClient } from '@fleet/db';
import { PrismaClient } from '../generated/prisma/client';

export type EventsDb = PrismaClient;
export type EventsTx = Omit<PrismaClient, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;

export function openEventsDb(databaseUrl: string, max = 10): EventsDb {
  return createPrismaClient(PrismaClient, databaseUrl, { max });
}
