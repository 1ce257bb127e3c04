import { runStaffCli, withMigratedDatabase } from '@fleet/db';
import { readAdminConfig } from '../config';
import { MIGRATIONS_DIR } from '../migrations';
import { openLightDb } from '../store/prisma';
import { AdminError, runAdminCommand } from './commands';

/** Staff commands for predefined command grants, run against light-command's own database whether or not the fleet is running. */
runStaffCli(async () => {
  const config = readAdminConfig();
  return withMigratedDatabase(config.DATABASE_URL, MIGRATIONS_DIR, (url) => openLightDb(url, 2), (db) => runAdminCommand(db, process.argv.slice(2)));
}, (err) => err instanceof AdminError);
