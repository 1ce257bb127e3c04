import { BridgeClient } from '@fleet/bridge-client';
import { ensureDatabase, migrate } from '@fleet/db';
import { RegistryClient } from '@fleet/registry-client';
import { DurablePullConsumer, partnerEventsRelay, ServiceRuntime } from '@fleet/service-kit';
import { readSystemConfig, systemFilter } from './config';
import { createFileUrls, UrlTokens } from './domain/signed-urls';
import { forgetRemovedDevices } from './handlers/device-events';
import { sysTrafficProcessor } from './handlers/device-in';
import { startHousekeeping } from './handlers/housekeeping';
import { serveSystem } from './handlers/serve';
import { DeviceInHistory } from './history/device-in-history';
import { startFileServer } from './http/file-server';
import { MIGRATIONS_DIR } from './migrations';
import { createStorage } from './storage';
import { openSystemDb } from './store/prisma';

async function main(): Promise<void> {
  const config = readSystemConfig();
  const runtime = await ServiceRuntime.start({ service: 'system-files', config, subjectPrefix: config.SUBJECT_PREFIX });
  const { logger, bus } = runtime;

  await ensureDatabase(config.DATABASE_URL);
  await migrate(config.DATABASE_URL, MIGRATIONS_DIR, { logger });
  const db = openSystemDb(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  runtime.onClose(() => db.$disconnect());
  // The relay creates PARTNER_EVENTS (retrying while NATS is away), then publishes what earlier
  // runs left in the outbox. Registered first among the intake closers, it stops last of them,
  // before the bus drains: events of the intake's last batch then wait in the outbox for another
  // replica's relay or this service's next start.
  const relay = partnerEventsRelay(db, bus.connection, logger.child({ component: 'outbox-relay' }));
  relay.start();
  runtime.onClose(() => relay.stop(), 'intake');

  if (!config.FILES_URL_SECRET) logger.warn('FILES_URL_SECRET is not set: download URLs and upload tickets are signed with a key of this process only (run one replica, and URLs die with it)');
  // The device protocol gives `addfile` an https URL; a local run serves plain HTTP, so this warns rather than refuses.
  if (config.FILE_STORAGE === 'local' && !config.FILES_PUBLIC_URL?.startsWith('https://')) {
    logger.warn({ files_public_url: config.FILES_PUBLIC_URL ?? null }, 'FILES_PUBLIC_URL is not an https:// address: devices are sent download URLs a protocol-conforming device may refuse (set it to the HTTPS address devices reach the file server at)');
  }
  const storage = createStorage(config);
  const tokens = new UrlTokens(config.FILES_URL_SECRET);
  const fileServer = await startFileServer({ config, db, storage, tokens, logger: logger.child({ component: 'file-server' }) });
  runtime.onClose(() => fileServer.close(), 'intake');
  const urls = createFileUrls(config, { tokens, storage, fileServerPort: fileServer.port });

  const downstream = { timeoutMs: config.DOWNSTREAM_TIMEOUT_MS };
  serveSystem(bus, {
    db,
    bridge: new BridgeClient(bus, { ...downstream, logger: logger.child({ component: 'bridge' }) }),
    registry: new RegistryClient(bus, { ...downstream, logger: logger.child({ component: 'registry' }) }),
    roots: { light: config.LIGHT_TOPIC_ROOT, meter: config.METER_TOPIC_ROOT },
    storage,
    urls,
    history: new DeviceInHistory(bus.connection, { stream: config.DEVICE_IN_STREAM, prefix: config.SUBJECT_PREFIX }),
    config,
  });

  // A removed device is forgotten (settings, feed rows, transfers): an id provisioned again starts clean.
  const removals = forgetRemovedDevices(bus.connection, db, logger.child({ component: 'device-events' }), { durable: config.DEVICE_EVENTS_CONSUMER });
  removals.start();
  runtime.onClose(() => removals.stop(), 'intake');

  const intake = new DurablePullConsumer(bus.connection, {
    stream: config.DEVICE_IN_STREAM,
    durable: config.SYSTEM_CONSUMER,
    filterSubject: systemFilter(config),
    batch: config.INGEST_BATCH,
    process: sysTrafficProcessor(db, config.SUBJECT_PREFIX, logger.child({ component: 'sys-intake' }), relay),
    logger: logger.child({ component: 'sys-intake' }),
  });
  intake.start();
  runtime.onClose(() => intake.stop(), 'intake');
  const housekeeping = startHousekeeping(
    db,
    {
      sweepMs: config.TRANSFER_SWEEP_MS,
      queuedGraceMs: 60_000,
      transferRetentionDays: config.TRANSFER_RETENTION_DAYS,
      responseRetentionDays: config.RESPONSE_RETENTION_DAYS,
    },
    logger.child({ component: 'housekeeping' }),
    relay,
  );
  runtime.onClose(() => housekeeping.stop(), 'intake');
  runtime.ready({ stream: config.DEVICE_IN_STREAM, consumer: config.SYSTEM_CONSUMER, files_port: fileServer.port, storage: storage.kind });
}

main().catch((err) => {
  console.error('system-files failed to start:', err);
  process.exit(1);
});
