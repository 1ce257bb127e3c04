import { BridgeClient } from '@fleet/bridge-client';
import { RegistryClient } from '@fleet/registry-client';
import { ensureDatabase, migrate } from '@fleet/db';
import { applyHeapSettings, DurablePullConsumer, partnerEventsRelay, ServiceRuntime } from '@fleet/service-kit';
import { meterFilter, meterParts, readMeterConfig } from './config';
import { deviceInProcessor } from './handlers/device-in';
import { SampleSweep } from './handlers/sample-sweep';
import { serveMeter } from './handlers/serve';
import { MIGRATIONS_DIR } from './migrations';
import { openMeterDb, openMeterReader } from './store/prisma';

async function main(): Promise<void> {
  const config = readMeterConfig();
  applyHeapSettings({ growingPercent: config.METER_HEAP_GROWING_PERCENT, minorGcTriggerPercent: config.METER_MINOR_GC_TRIGGER_PERCENT });
  const runtime = await ServiceRuntime.start({ service: 'meter', config, subjectPrefix: config.SUBJECT_PREFIX });
  const { logger, bus } = runtime;

  await ensureDatabase(config.DATABASE_URL);
  await migrate(config.DATABASE_URL, MIGRATIONS_DIR, { logger });
  const db = openMeterDb(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  runtime.onClose(() => db.$disconnect());
  const parts = meterParts(config);

  // Both roles write partner events (ingest: records stored, requests settled by the meter's
  // answers; queries: a live reading read past its deadline; either: the no_reply sweep), so every
  // replica relays its outbox to PARTNER_EVENTS (one pass at a time across replicas: the relay's
  // advisory lock). It creates the stream if missing, then publishes what earlier runs left.
  const relay = partnerEventsRelay(db, bus.connection, logger.child({ component: 'outbox-relay' }));
  // A commit that wrote events: relay now rather than at the next poll.
  const onEvents = (): void => relay.nudge();
  relay.start();
  // Intake closers run in reverse order: the sweep and the consumer stop first, then the relay,
  // all before the bus drains. Events committed after that wait in the outbox for another
  // replica's relay or this service's next start.
  runtime.onClose(() => relay.stop(), 'intake');
  const sweep = new SampleSweep(db, config.SAMPLE_SWEEP_INTERVAL_MS, logger.child({ component: 'sample-sweep' }), onEvents);

  if (parts.queries) {
    const readDb = openMeterReader(config.DATABASE_READ_URL ?? config.DATABASE_URL, config.DATABASE_POOL_MAX);
    runtime.onClose(() => readDb.close());
    serveMeter(bus, {
      db,
      readDb,
      bridge: new BridgeClient(bus, { timeoutMs: config.DOWNSTREAM_TIMEOUT_MS, logger: logger.child({ component: 'bridge' }) }),
      registry: new RegistryClient(bus, { timeoutMs: config.DOWNSTREAM_TIMEOUT_MS, logger: logger.child({ component: 'registry' }) }),
      topicRoot: config.METER_TOPIC_ROOT,
      onEvents,
    });
  }

  if (parts.ingest) {
    const ingest = new DurablePullConsumer(bus.connection, {
      stream: config.DEVICE_IN_STREAM,
      durable: config.METER_CONSUMER,
      filterSubject: meterFilter(config),
      batch: config.INGEST_BATCH,
      ackWaitS: config.INGEST_ACK_WAIT_SECONDS,
      process: deviceInProcessor(db, config.SUBJECT_PREFIX, logger.child({ component: 'ingest' }), onEvents),
      logger: logger.child({ component: 'ingest' }),
    });
    ingest.start();
    runtime.onClose(() => ingest.stop(), 'intake');
  }
  sweep.start();
  runtime.onClose(() => sweep.stop(), 'intake');
  runtime.ready({ role: config.METER_ROLE, stream: config.DEVICE_IN_STREAM, consumer: config.METER_CONSUMER, read_replica: Boolean(config.DATABASE_READ_URL) });
}

main().catch((err) => {
  console.error('meter failed to start:', err);
  process.exit(1);
});
