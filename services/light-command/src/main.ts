import { BridgeClient } from '@fleet/bridge-client';
import { ensureDatabase, migrate } from '@fleet/db';
import { ServiceRuntime } from '@fleet/service-kit';
import { readLightCommandConfig } from './config';
import { forgetRemovedDevices } from './handlers/device-events';
import { serveLight } from './handlers/light';
import { stateConsumer } from './handlers/state-consumer';
import { MIGRATIONS_DIR } from './migrations';
import { openLightDb } from './store/prisma';

async function main(): Promise<void> {
  const config = readLightCommandConfig();
  const runtime = await ServiceRuntime.start({ service: 'light-command', config });
  const { logger, bus } = runtime;

  await ensureDatabase(config.DATABASE_URL);
  await migrate(config.DATABASE_URL, MIGRATIONS_DIR, { logger });
  const db = openLightDb(config.DATABASE_URL);
  runtime.onClose(() => db.$disconnect());

  serveLight(bus, {
    db,
    publisher: new BridgeClient(bus, { timeoutMs: config.BRIDGE_REQUEST_TIMEOUT_MS, logger: logger.child({ component: 'bridge' }) }),
    topicRoot: config.LIGHT_TOPIC_ROOT,
    logger: logger.child({ component: 'handlers' }),
  });
  const removals = forgetRemovedDevices(bus.connection, db, logger.child({ component: 'device-events' }), config.DEVICE_EVENTS_CONSUMER);
  removals.start();
  runtime.onClose(() => removals.stop(), 'intake');
  const states = stateConsumer(
    bus.connection,
    db,
    { stream: config.STATE_STREAM, durable: config.STATE_CONSUMER, filterSubject: config.STATE_FILTER },
    logger.child({ component: 'state' }),
  );
  states.start();
  runtime.onClose(() => states.stop(), 'intake');
  runtime.ready({ topic_root: config.LIGHT_TOPIC_ROOT });
}

main().catch((err) => {
  console.error('light-command failed to start:', err);
  process.exit(1);
});
