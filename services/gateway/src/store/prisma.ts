import { createPrismaClient } from '@fleet/db';
import { PrismaClient } from '../generated/prisma/client';

export type GatewayDb = PrismaClient;

export function openGatewayDb(databaseUrl: string): GatewayDb {
  return createPrismaClient(PrismaClient, databaseUrl, { max: 10 });
}
