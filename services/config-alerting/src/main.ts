import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { ensureDatabase, migrate } from '@fleet/db';
import { LightClient } from '@fleet/light-client';
import { RegistryClient } from '@fleet/registry-client';
import { partnerEventsRelay, ServiceRuntime } from '@fleet/service-kit';
import { readConfigAlertingConfig } from './config';
import { forgetRemovedDevices } from './handlers/device-events';
import { readingsConsumer } from './handlers/readings-consumer';
import { serveConfig } from './handlers/serve';
import { MIGRATIONS_DIR } from './migrations';
import { openConfigDb } from './store/prisma';
import { EvaluationCycle } from './use-cases/evaluation-cycle';

async function main(): Promise<void> {
  const config = readConfigAlertingConfig();
  const runtime = await ServiceRuntime.start({ service: 'config-alerting', config });
  const { logger, bus } = runtime;

  await ensureDatabase(config.DATABASE_URL);
  await migrate(config.DATABASE_URL, MIGRATIONS_DIR, { logger });
  const db = openConfigDb(config.DATABASE_URL);
  runtime.onClose(() => db.$disconnect());
  // The relay creates PARTNER_EVENTS (retrying while NATS is away), then publishes what earlier
  // runs left in the outbox. Registered first among the intake closers, it stops last of them,
  // after the cycle, and before the bus drains: events it has not published then wait in the
  // outbox for another replica's relay or this service's next start.
  const relay = partnerEventsRelay(db, bus.connection, logger.child({ component: 'outbox-relay' }));
  relay.start();
  runtime.onClose(() => relay.stop(), 'intake');

  const registry = new RegistryClient(bus, { timeoutMs: config.DOWNSTREAM_TIMEOUT_MS, logger: logger.child({ component: 'registry' }) });
  const lights = new LightClient(bus, { timeoutMs: config.DOWNSTREAM_TIMEOUT_MS, logger: logger.child({ component: 'lights' }) });
  serveConfig(bus, { db, registry });

  const removals = forgetRemovedDevices(bus.connection, db, logger.child({ component: 'device-events' }), config.DEVICE_EVENTS_CONSUMER);
  removals.start();
  runtime.onClose(() => removals.stop(), 'intake');
  const readings = readingsConsumer(
    bus.connection,
    db,
    { stream: config.READINGS_STREAM, durable: config.READINGS_CONSUMER, filterSubject: config.READINGS_FILTER, batch: config.READINGS_BATCH },
    logger.child({ component: 'readings' }),
  );
  readings.start();
  runtime.onClose(() => readings.stop(), 'intake');

  const cycle = new EvaluationCycle({
    db,
    lights,
    registry,
    logger: logger.child({ component: 'evaluation' }),
    // Shard claims name the replica: host and process, so an SRE (or a test) can tell who holds one.
    owner: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
    relay,
    settings: {
      periodMs: config.EVALUATION_PERIOD_MS,
      shards: config.EVALUATION_SHARDS,
      leaseMs: config.EVALUATION_LEASE_MS,
      windowMs: config.METRICS_WINDOW_MS,
      retentionMs: config.READINGS_RETENTION_MS,
      callTimeoutMs: config.DOWNSTREAM_TIMEOUT_MS,
    },
  });
  cycle.start();
  runtime.onClose(() => cycle.stop(), 'intake');
  runtime.ready({ evaluation_period_ms: config.EVALUATION_PERIOD_MS, replica: cycle.owner });
}

main().catch((err) => {
  console.error('config-alerting failed to start:', err);
  process.exit(1);
});
