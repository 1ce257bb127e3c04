import { BridgeClient } from '@fleet/bridge-client';
import { ensureDatabase, migrate } from '@fleet/db';
import { PeriodicJob, ServiceRuntime } from '@fleet/service-kit';
import { BrokerHook } from './broker/broker-hook';
import { CredentialCache } from './broker/credential-cache';
import { HookCredentials, type RegistryBroker } from './broker/hook-credentials';
import { HookServer } from './broker/hook-server';
import { SessionTakeover } from './broker/session-takeover';
import { registerDeviceMetrics } from './device-metrics';
import type { TopicRoots } from './domain/broker-access';
import { platformIdentity, readRegistryConfig, settingsKek, type RegistryConfig } from './config';
import { connectivityConsumer } from './handlers/connectivity-consumer';
import { OutboxRelay } from './handlers/outbox-relay';
import { RecentConnectivity } from './handlers/recent-connectivity';
import { serveRegistry } from './handlers/registry';
import { SilenceSweep } from './handlers/silence-sweep';
import { telemetryConsumer } from './handlers/telemetry-consumer';
import { MIGRATIONS_DIR } from './migrations';
import { openRegistryDb } from './store/prisma';
import { purgeTelemetry } from './store/telemetry';

async function main(): Promise<void> {
  const config = readRegistryConfig();
  const kek = settingsKek(config);
  const runtime = await ServiceRuntime.start({ service: 'device-registry', config });
  const { logger, bus } = runtime;

  await ensureDatabase(config.DATABASE_URL);
  await migrate(config.DATABASE_URL, MIGRATIONS_DIR, { logger });
  const db = openRegistryDb(config.DATABASE_URL);
  runtime.onClose(() => db.$disconnect());

  // The relay creates REGISTRY_EVENTS (retrying while NATS is away), then publishes what earlier
  // runs and the staff CLI left in the outbox.
  const relay = new OutboxRelay(db, bus.connection, logger.child({ component: 'outbox-relay' }));
  // Heard before the requests are served, so no read misses a batch the consumer has not stored.
  const recent = new RecentConnectivity(bus.connection, config.CONNECTIVITY_SUBJECT, logger.child({ component: 'recent-connectivity' }));
  recent.start();
  runtime.onClose(() => recent.stop(), 'intake');
  registerDeviceMetrics(db);
  const credentials = new CredentialCache(db, config.BROKER_HOOK_CACHE_MS);
  if (config.BROKER_HOOK_PORT > 0) {
    const hookServer = new HookServer(brokerHook(config, credentials), logger.child({ component: 'broker-hook' }));
    const port = await hookServer.listen(config.BROKER_HOOK_PORT);
    logger.info({ port }, 'broker authentication hook listening');
    runtime.onClose(() => hookServer.close());
  }
  const broker: RegistryBroker =
    config.BROKER_CREDENTIALS === 'hook'
      ? new HookCredentials(credentials, new SessionTakeover(config.MQTT_URL, platformIdentity(config), topicRoots(config), logger.child({ component: 'takeover' })), config.BROKER_HOOK_CACHE_MS, logger)
      : new BridgeClient(bus, { timeoutMs: config.BRIDGE_REQUEST_TIMEOUT_MS, logger: logger.child({ component: 'bridge' }) });
  serveRegistry(bus, {
    db,
    kek,
    broker,
    brokerKeepsCredentials: config.BROKER_CREDENTIALS === 'dynsec',
    logger: logger.child({ component: 'handlers' }),
    relay,
    recent,
  });

  const connectivity = connectivityConsumer(
    bus.connection,
    db,
    { stream: config.CONNECTIVITY_STREAM, durable: config.CONNECTIVITY_CONSUMER, subject: config.CONNECTIVITY_SUBJECT },
    logger.child({ component: 'connectivity' }),
    relay,
  );
  const telemetry = telemetryConsumer(
    bus.connection,
    db,
    { stream: config.TELEMETRY_STREAM, durable: config.TELEMETRY_CONSUMER, filterSubject: config.TELEMETRY_FILTER },
    logger.child({ component: 'telemetry' }),
  );
  // Judges silence only on current data: it waits while the consumer above has a backlog.
  const silence = new SilenceSweep(
    bus.connection,
    db,
    {
      stream: config.CONNECTIVITY_STREAM,
      durable: config.CONNECTIVITY_CONSUMER,
      silenceSeconds: config.CONNECTIVITY_SILENCE_SECONDS,
      intervalMs: config.CONNECTIVITY_SWEEP_INTERVAL_SECONDS * 1000,
    },
    logger.child({ component: 'silence-sweep' }),
    relay,
  );
  const retention = new PeriodicJob(
    'telemetry-retention',
    config.TELEMETRY_RETENTION_INTERVAL_SECONDS * 1000,
    async () => {
      const removed = await purgeTelemetry(db, new Date(Date.now() - config.TELEMETRY_RETENTION_DAYS * 86_400_000));
      if (removed > 0) logger.info({ removed }, 'telemetry past retention deleted');
    },
    logger,
  );
  // The relay stops before the bus drains and closes its connection: events of requests still
  // in flight then wait in the outbox for another replica's relay or this service's next start.
  for (const worker of [relay, connectivity, telemetry, silence, retention]) {
    worker.start();
    runtime.onClose(() => worker.stop(), 'intake');
  }
  runtime.ready();
}

function topicRoots(config: RegistryConfig): TopicRoots {
  return { light: config.LIGHT_TOPIC_ROOT, meter: config.METER_TOPIC_ROOT };
}

function brokerHook(config: RegistryConfig, credentials: CredentialCache): BrokerHook {
  return new BrokerHook(credentials, platformIdentity(config), topicRoots(config));
}

main().catch((err) => {
  console.error('device-registry failed to start:', err);
  process.exit(1);
});
