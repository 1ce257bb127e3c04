import type { Principal } from '@fleet/contracts';
import { Bus, createLogger, type Logger } from '@fleet/service-kit';
import { uniqueId, createMigratedTestDb, type TestDatabase } from '@fleet/test-kit';
import { MIGRATIONS_DIR } from '../src/migrations';
import { openRegistryDb, type RegistryDb } from '../src/store/prisma';

export { startPrivateNats, type PrivateNats } from '@fleet/test-kit';

export type TestDb = TestDatabase<RegistryDb>;

/** A migrated database of this test file's own. */
export const createTestDb = (): Promise<TestDb> => createMigratedTestDb('registry_test_', MIGRATIONS_DIR, (url) => openRegistryDb(url, 4));

export const logger: Logger = createLogger('device-registry-test', process.env.TEST_LOG_LEVEL ?? 'silent');

export async function connectBus(url: string, service = 'device-registry'): Promise<Bus> {
  return Bus.connect({ servers: url, service, logger, requestTimeoutMs: 3000 });
}

/** mqtt-bridge's stand-in, shared by every caller's tests. */
export { BridgeStandIn } from '@fleet/test-kit';

export function principal(overrides: Partial<Principal> = {}): Principal {
  return {
    partner_id: uniqueId('p'),
    name: 'Test partner',
    key_prefix: 'pk_test',
    permissions: [],
    org_grants: [],
    allowed_channels: ['light1', 'light2', 'light3', 'sound', 'contact'],
    limits: { requests_per_min: 600, device_commands_per_min: 60 },
    ...overrides,
  };
}
