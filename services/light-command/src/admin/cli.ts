import { ensureDatabase, migrate } from '@fleet/db';
import { readAdminConfig } from '../config';
import { MIGRATIONS_DIR } from '../migrations';
import { openLightDb } from '../store/prisma';
import { AdminError, runAdminCommand } from './commands';

/**
 * Staff commands for predefined command grants, run against light-command's own database
 * whether or not the fleet is running. Prints one JSON object; errors go to stderr with a
 * non-zero exit.
 */
async function main(): Promise<void> {
  const config = readAdminConfig();
  await ensureDatabase(config.DATABASE_URL);
  await migrate(config.DATABASE_URL, MIGRATIONS_DIR);
  const db = openLightDb(config.DATABASE_URL, 2);
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
