import { Bus, createLogger, type Logger } from '@fleet/service-kit';
import { createMigratedTestDb, type TestDatabase } from '@fleet/test-kit';
import { MIGRATIONS_DIR } from '../src/migrations';
import { openLightDb, type LightDb } from '../src/store/prisma';

export { partnerId, principal, startPrivateNats, type PrivateNats } from '@fleet/test-kit';

export type TestDb = TestDatabase<LightDb>;

/** A migrated database of this test file's own. */
export const createTestDb = (): Promise<TestDb> => createMigratedTestDb('light_command_test_', MIGRATIONS_DIR, (url) => openLightDb(url, 4));

export const logger: Logger = createLogger('light-command-test', process.env.TEST_LOG_LEVEL ?? 'silent');

export async function connectBus(url: string, service = 'light-command'): Promise<Bus> {
  return Bus.connect({ servers: url, service, logger, requestTimeoutMs: 3000 });
}


