import { runStaffCli, withMigratedDatabase } from '@fleet/db';
import { readRegistryConfig } from '../config';
import { MIGRATIONS_DIR } from '../migrations';
import { openRegistryDb } from '../store/prisma';
import { AdminError, runAdminCommand } from './commands';

/**
 * Staff commands for the organization tree, run against the registry's own database whether
 * or not the fleet is running.
 */
runStaffCli(async () => {
  const config = readRegistryConfig({ ...process.env, HEALTH_PORT: process.env.HEALTH_PORT ?? '0' });
  return withMigratedDatabase(config.DATABASE_URL, MIGRATIONS_DIR, (url) => openRegistryDb(url, 2), (db) =>
    runAdminCommand(db, process.argv.slice(2)),
  );
}, (err) => err instanceof AdminError);
