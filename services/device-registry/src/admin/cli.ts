import { connect, JSONCodec, type NatsConnection } from 'nats';
import { checkEvent } from '@fleet/contracts';
import { runStaffCli, withMigratedDatabase } from '@fleet/db';
import { publishDurable } from '@fleet/service-kit';
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

/**
 * Tells services the tree changed (a durable event, kept in REGISTRY_EVENTS); skipped when NATS
 * is not running. Before the registry ever started, the stream is missing: then only services
 * running now hear it (a plain publish), which is all a new fleet has.
 */
async function announceOrgCreated(natsUrl: string, orgNodeId: number): Promise<void> {
  let nc: NatsConnection;
  try {
    nc = await connect({ servers: natsUrl, reconnect: false, timeout: 1000, name: 'device-registry-admin' });
  } catch {
    return; // The fleet is not running: nothing caches the tree.
  }
  const event = { org_node_id: orgNodeId, change: 'created' as const, at: new Date().toISOString() };
  try {
    await publishDurable(nc, 'evt.registry.org.changed.v1', event, { timeoutMs: 2000 });
  } catch (err) {
    process.stderr.write(`org created, but its event was not stored (${(err as Error).message}); announcing it to running services only\n`);
    nc.publish('evt.registry.org.changed.v1', JSONCodec().encode(checkEvent('evt.registry.org.changed.v1', event)));
    // Best effort: the node is created either way, and the message above says the event may be missing.
    await nc.flush().catch(() => undefined);
  }
  await nc.close();
}
