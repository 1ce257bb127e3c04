import { ensureDatabase, migrate } from '@fleet/db';
import { readRegistryConfig } from '../config';
import { MIGRATIONS_DIR } from '../migrations';
import { openRegistryDb } from '../store/prisma';
import { AdminError, runAdminCommand } from './commands';

/**
 * Staff commands for the organization tree, run against the registry's own database whether
 * or not the fleet is running. Prints one JSON object; errors go to stderr with a non-zero exit.
 */
async function main(): Promise<void> {
  const config = readRegistryConfig({ ...process.env, HEALTH_PORT: process.env.HEALTH_PORT ?? '0' });
  await ensureDatabase(config.DATABASE_URL);
  await migrate(config.DATABASE_URL, MIGRATIONS_DIR);
  const db = openRegistryDb(config.DATABASE_URL, 2);
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
