import { Bus, createLogger, type Logger } from '@fleet/service-kit';
import { createMigratedTestDb, type TestDatabase } from '@fleet/test-kit';
import { MIGRATIONS_DIR } from '../src/migrations';
import { openEventsDb, type EventsDb } from '../src/store/prisma';

export { partnerId, principal, startPrivateNats, type PrivateNats } from '@fleet/test-kit';

export type TestDb = TestDatabase<EventsDb>;

/** A migrated database of this test file's own. */
export const createTestDb = (): Promise<TestDb> => createMigratedTestDb('events_test_', MIGRATIONS_DIR, (url) => openEventsDb(url, 6));

export const logger: Logger = createLogger('events-test', process.env.TEST_LOG_LEVEL ?? 'silent');

export async function connectBus(url: string, service = 'events'): Promise<Bus> {
  return Bus.connect({ servers: url, service, logger, requestTimeoutMs: 3000 });
}
