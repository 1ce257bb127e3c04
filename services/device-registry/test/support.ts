import { Bus, createLogger, type Logger } from '@fleet/service-kit';
import { createMigratedTestDb, type TestDatabase } from '@fleet/test-kit';
import { MIGRATIONS_DIR } from '../src/migrations';
import { openRegistryDb, type RegistryDb } from '../src/store/prisma';

export { partnerId, principal, startPrivateNats, type PrivateNats } from '@fleet/test-kit';

export type TestDb = TestDatabase<RegistryDb>;

/** A migrated database of this test file's own. */
export const createTestDb = (): Promise<TestDb> => createMigratedTestDb('registry_test_', MIGRATIONS_DIR, (url) => openRegistryDb(url, 4));

export const logger: Logger = createLogger('device-registry-test', process.env.TEST_LOG_LEVEL ?? 'silent');

export async function connectBus(url: string, service = 'device-registry'): Promise<Bus> {
  return Bus.connect({ servers: url, service, logger, requestTimeoutMs: 3000 });
}

/** mqtt-bridge's stand-in, shared by every caller's tests. */
export { BridgeStandIn } from '@fleet/test-kit';

