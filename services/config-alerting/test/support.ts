import { Bus, createLogger, type Logger } from '@fleet/service-kit';
import { createMigratedTestDb, type TestDatabase } from '@fleet/test-kit';
import { MIGRATIONS_DIR } from '../src/migrations';
import { openConfigDb, type ConfigDb } from '../src/store/prisma';

export { partnerId, principal, startPrivateNats, type PrivateNats } from '@fleet/test-kit';

export type TestDb = TestDatabase<ConfigDb>;

/** A migrated database of this test file's own. */
export const createTestDb = (): Promise<TestDb> => createMigratedTestDb('config_alerting_test_', MIGRATIONS_DIR, (url) => openConfigDb(url, 4));

export const logger: Logger = createLogger('config-alerting-test', process.env.TEST_LOG_LEVEL ?? 'silent');

export async function connectBus(url: string, service = 'config-alerting'): Promise<Bus> {
  return Bus.connect({ servers: url, service, logger, requestTimeoutMs: 3000 });
}


