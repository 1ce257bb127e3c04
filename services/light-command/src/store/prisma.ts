import { createPrismaClient } from '@fleet/db';
import { PrismaClient } from '../generated/prisma/client';

export type LightDb = PrismaClient;

export function openLightDb(databaseUrl: string, max = 10): LightDb {
  return createPrismaClient(PrismaClient, databaseUrl, { max });
}
