import { ensureDatabase, migrate } from '@fleet/db';
import { RegistryClient } from '@fleet/registry-client';
import { DURABLE_EVENT_RETENTION_MS, ensureStream, eventStreamPlan, PARTNER_EVENTS_STREAM, PeriodicJob, ServiceRuntime } from '@fleet/service-kit';
import { DevicePlaces } from './access/device-places';
import { PartnerAccessDirectory } from './access/partner-access';
import { readEventsConfig, secretsKeyOf } from './config';
import { DeliveryWorker } from './handlers/delivery-worker';
import { fanoutConsumer } from './handlers/fanout';
import { serveEvents } from './handlers/webhooks';
import { ReceiverClient } from './http/receiver-client';
import { StreamServer } from './http/stream-server';
import { MIGRATIONS_DIR } from './migrations';
import { purgeSettled } from './store/deliveries';
import { prunePlaceChanges } from './store/place-changes';
import { openEventsDb } from './store/prisma';

const PURGE_INTERVAL_MS = 3_600_000;
/** Changes of place are kept this long beyond the events' retention in PARTNER_EVENTS. */
const PLACE_CHANGES_MARGIN_MS = 86_400_000;

async function main(): Promise<void> {
  const config = readEventsConfig();
  const secretsKey = secretsKeyOf(config);
  const runtime = await ServiceRuntime.start({ service: 'events', config });
  const { logger, bus } = runtime;
  if (!config.WEBHOOK_SECRETS_KEY) logger.warn('WEBHOOK_SECRETS_KEY is not set: signing secrets are sealed with the development key');

  await ensureDatabase(config.DATABASE_URL);
  await migrate(config.DATABASE_URL, MIGRATIONS_DIR, { logger });
  const db = openEventsDb(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  runtime.onClose(() => db.$disconnect());
  // The stream exists before any producer relays to it, so the fan-out and live streams can read it.
  if (config.PARTNER_EVENTS_STREAM === PARTNER_EVENTS_STREAM) await ensureStream(await bus.connection.jetstreamManager(), eventStreamPlan(PARTNER_EVENTS_STREAM), logger);

  const timeouts = { cacheMs: config.ACCESS_CACHE_MS, timeoutMs: config.DOWNSTREAM_TIMEOUT_MS };
  const access = new PartnerAccessDirectory(bus, timeouts);
  const registry = new RegistryClient(bus, { timeoutMs: config.DOWNSTREAM_TIMEOUT_MS, logger: logger.child({ component: 'registry' }) });
  const places = new DevicePlaces(registry, db, timeouts);
  const policy = { local: config.WEBHOOK_LOCAL_RECEIVERS };
  if (policy.local) logger.warn('WEBHOOK_LOCAL_RECEIVERS: webhooks may reach loopback and private addresses over http (local use only)');

  const client = new ReceiverClient({ policy, timeoutMs: config.WEBHOOK_TIMEOUT_MS, maxSocketsPerHost: config.WEBHOOK_CONCURRENCY_PER_ENDPOINT });
  runtime.onClose(() => client.close());
  const worker = new DeliveryWorker({
    db,
    mayStillReceive: (partnerId, eventType) => access.mayStillReceive(partnerId, eventType),
    client,
    secretsKey,
    schedule: config.WEBHOOK_RETRY_SCHEDULE,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    concurrency: config.WEBHOOK_CONCURRENCY,
    perEndpoint: config.WEBHOOK_CONCURRENCY_PER_ENDPOINT,
    logger: logger.child({ component: 'delivery' }),
  });

  const streams = new StreamServer({
    nc: bus.connection,
    db,
    access,
    places,
    stream: config.PARTNER_EVENTS_STREAM,
    maxPerPartner: config.EVENTS_MAX_STREAMS_PER_PARTNER,
    keepAliveMs: config.EVENTS_KEEPALIVE_SECONDS * 1000,
    ...(config.EVENTS_STREAM_INTERNAL_URL ? { baseUrl: config.EVENTS_STREAM_INTERNAL_URL } : config.POD_IP ? { podAddress: config.POD_IP } : {}),
    logger: logger.child({ component: 'stream' }),
  });
  const streamPort = await streams.listen(config.EVENTS_STREAM_PORT, config.EVENTS_STREAM_HOST);
  runtime.onClose(() => streams.close(), 'intake');

  serveEvents(bus, {
    db,
    secretsKey,
    policy,
    webhooksPerPartner: config.WEBHOOKS_PER_PARTNER,
    queued: () => worker.nudge(),
    tickets: streams,
    registry,
  });

  const fanout = fanoutConsumer(
    bus.connection,
    { db, access, places, logger: logger.child({ component: 'fanout' }), stored: () => worker.nudge() },
    { stream: config.PARTNER_EVENTS_STREAM, durable: config.FANOUT_CONSUMER },
  );
  fanout.start();
  runtime.onClose(() => fanout.stop(), 'intake');
  worker.start();
  runtime.onClose(() => worker.stop());

  const purge = new PeriodicJob(
    'delivery-retention',
    PURGE_INTERVAL_MS,
    async () => {
      const removed = await purgeSettled(db, new Date(Date.now() - config.DELIVERY_RETENTION_DAYS * 86_400_000));
      if (removed > 0) logger.info({ removed }, 'deliveries past retention deleted');
      // A change of place judges the events before it: once they have left the stream, it is not needed.
      const pruned = await prunePlaceChanges(db, new Date(Date.now() - DURABLE_EVENT_RETENTION_MS - PLACE_CHANGES_MARGIN_MS));
      if (pruned > 0) logger.info({ pruned }, 'changes of place older than the stream deleted');
    },
    logger,
  );
  purge.start();
  runtime.onClose(() => purge.stop());

  runtime.ready({ stream_port: streamPort, local_receivers: policy.local });
}

main().catch((err) => {
  console.error('events failed to start:', err);
  process.exit(1);
});
