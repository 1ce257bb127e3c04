import { connect, JSONCodec } from 'nats';
import { checkEvent } from '@fleet/contracts';
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
  const result = await withMigratedDatabase(config.DATABASE_URL, MIGRATIONS_DIR, (url) => openRegistryDb(url, 2), (db) =>
    runAdminCommand(db, process.argv.slice(2)),
  );
  if (process.argv[3] === 'create' && typeof result.id === 'number') await announceOrgCreated(config.NATS_URL, result.id);
  return result;
}, (err) => err instanceof AdminError);

/** Tells running services (the gateway's scope cache) the tree changed; skipped when NATS is not running. */
async function announceOrgCreated(natsUrl: string, orgNodeId: number): Promise<void> {
  try {
    const nc = await connect({ servers: natsUrl, reconnect: false, timeout: 1000, name: 'device-registry-admin' });
    const event = checkEvent('evt.registry.org.changed', { org_node_id: orgNodeId, change: 'created', at: new Date().toISOString() });
    nc.publish('evt.registry.org.changed', JSONCodec().encode(event));
    await nc.flush();
    await nc.close();
  } catch {
    // The fleet is not running: nothing caches the tree.
  }
}
