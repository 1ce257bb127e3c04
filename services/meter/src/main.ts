import { BridgeClient } from '@fleet/bridge-client';
import { RegistryClient } from '@fleet/registry-client';
import { ensureDatabase, migrate } from '@fleet/db';
import { ServiceRuntime, DurablePullConsumer } from '@fleet/service-kit';
import { meterFilter, meterParts, readMeterConfig } from './config';
import { deviceInProcessor } from './handlers/device-in';
import { serveMeter } from './handlers/serve';
import { MIGRATIONS_DIR } from './migrations';
import { openMeterDb } from './store/prisma';

async function main(): Promise<void> {
  const config = readMeterConfig();
  const runtime = await ServiceRuntime.start({ service: 'meter', config, subjectPrefix: config.SUBJECT_PREFIX });
  const { logger, bus } = runtime;

  await ensureDatabase(config.DATABASE_URL);
  await migrate(config.DATABASE_URL, MIGRATIONS_DIR, { logger });
  const db = openMeterDb(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  runtime.onClose(() => db.$disconnect());
  const parts = meterParts(config);

  if (parts.queries) {
    const readDb = config.DATABASE_READ_URL ? openMeterDb(config.DATABASE_READ_URL, config.DATABASE_POOL_MAX) : undefined;
    if (readDb) runtime.onClose(() => readDb.$disconnect());
    serveMeter(bus, {
      db,
      ...(readDb ? { readDb } : {}),
      bridge: new BridgeClient(bus, { timeoutMs: config.DOWNSTREAM_TIMEOUT_MS, logger: logger.child({ component: 'bridge' }) }),
      registry: new RegistryClient(bus, { timeoutMs: config.DOWNSTREAM_TIMEOUT_MS, logger: logger.child({ component: 'registry' }) }),
      topicRoot: config.METER_TOPIC_ROOT,
    });
  }

  if (parts.ingest) {
    const ingest = new DurablePullConsumer(bus.connection, {
      stream: config.DEVICE_IN_STREAM,
      durable: config.METER_CONSUMER,
      filterSubject: meterFilter(config),
      batch: config.INGEST_BATCH,
      ackWaitS: config.INGEST_ACK_WAIT_SECONDS,
      process: deviceInProcessor(db, config.SUBJECT_PREFIX, logger.child({ component: 'ingest' })),
      logger: logger.child({ component: 'ingest' }),
    });
    ingest.start();
    runtime.onClose(() => ingest.stop(), 'intake');
  }
  runtime.ready({ role: config.METER_ROLE, stream: config.DEVICE_IN_STREAM, consumer: config.METER_CONSUMER, read_replica: Boolean(config.DATABASE_READ_URL) });
}

main().catch((err) => {
  console.error('meter failed to start:', err);
  process.exit(1);
});
