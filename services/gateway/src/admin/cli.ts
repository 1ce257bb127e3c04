import { runStaffCli, withMigratedDatabase } from '@fleet/db';
import { readGatewayConfig } from '../config';
import { MIGRATIONS_DIR } from '../migrations';
import { openGatewayDb } from '../store/prisma';
import { AdminError, runAdminCommand } from './commands';

/**
 * Staff commands for partners and keys, run against the gateway's own database whether or
 * not the fleet is running. Running gateways hear of every change through Postgres NOTIFY and
 * apply it on the next request.
 */
runStaffCli(async () => {
  const config = readGatewayConfig({ ...process.env, HEALTH_PORT: process.env.HEALTH_PORT ?? '0' });
  return withMigratedDatabase(config.DATABASE_URL, MIGRATIONS_DIR, openGatewayDb, (db) => runAdminCommand(db, process.argv.slice(2)));
}, (err) => err instanceof AdminError);
