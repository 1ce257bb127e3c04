import { ensureDatabase, migrate } from '@fleet/db';
import { readGatewayConfig } from '../config';
import { MIGRATIONS_DIR } from '../migrations';
import { openGatewayDb } from '../store/prisma';
import { AdminError, runAdminCommand } from './commands';

/**
 * Staff commands for partners and keys, run against the gateway's own database whether or
 * not the fleet is running. Prints one JSON object; errors go to stderr with a non-zero exit.
 * Running gateways hear of every change through Postgres NOTIFY and apply it on the next request.
 */
async function main(): Promise<void> {
  const config = readGatewayConfig({ ...process.env, HEALTH_PORT: process.env.HEALTH_PORT ?? '0' });
  await ensureDatabase(config.DATABASE_URL);
  await migrate(config.DATABASE_URL, MIGRATIONS_DIR);
  const db = openGatewayDb(config.DATABASE_URL);
  try {
    const result = await runAdminCommand(db, process.argv.slice(2));
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await db.$disconnect();
  }
}

main().catch((err) => {
  const message = err instanceof AdminError ? err.message : `failed: ${(err as Error).message ?? String(err)}`;
  process.stderr.write(`admin: ${message}\n`);
  process.exit(1);
});
