import type { Principal } from '@fleet/contracts';
import { Bus, createLogger, type Logger } from '@fleet/service-kit';
import { createMigratedTestDb, type TestDatabase } from '@fleet/test-kit';
import { MIGRATIONS_DIR } from '../src/migrations';
import { openConfigDb, type ConfigDb } from '../src/store/prisma';

export { startPrivateNats, type PrivateNats } from '@fleet/test-kit';

export type TestDb = TestDatabase<ConfigDb>;

/** A migrated database of this test file's own. */
export const createTestDb = (): Promise<TestDb> => createMigratedTestDb('config_alerting_test_', MIGRATIONS_DIR, (url) => openConfigDb(url, 4));

export const logger: Logger = createLogger('config-alerting-test', process.env.TEST_LOG_LEVEL ?? 'silent');

export async function connectBus(url: string, service = 'config-alerting'): Promise<Bus> {
  return Bus.connect({ servers: url, service, logger, requestTimeoutMs: 3000 });
}

/** A random UUID-shaped partner id, as the gateway issues them. */
export function partnerId(): string {
  return crypto.randomUUID();
}

export function principal(overrides: Partial<Principal> = {}): Principal {
  return {
    partner_id: partnerId(),
    name: 'Test partner',
    key_prefix: 'pk_test',
    permissions: [],
    org_grants: [],
    allowed_channels: ['light1', 'light2', 'light3', 'sound', 'contact'],
    limits: { requests_per_min: 600, device_commands_per_min: 60 },
    ...overrides,
  };
}
