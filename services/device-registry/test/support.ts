import { JSONCodec, type NatsConnection, type Subscription } from 'nats';
import type { Principal, RequestEnvelope } from '@fleet/contracts';
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

/**
 * Stands in for mqtt-bridge's credential subjects (the bridge is not under test here): records
 * every request and answers success, a broker refusal (503 broker_unavailable), or nothing.
 */
export class BridgeStandIn {
  readonly upserts: Record<string, unknown>[] = [];
  readonly deletes: Record<string, unknown>[] = [];
  mode: 'ok' | 'refuse' | 'silent' = 'ok';
  private readonly subs: Subscription[] = [];

  constructor(nc: NatsConnection) {
    const codec = JSONCodec<RequestEnvelope>();
    for (const [subject, log] of [
      ['bridge.credential.upsert', this.upserts],
      ['bridge.credential.delete', this.deletes],
    ] as const) {
      this.subs.push(
        nc.subscribe(subject, {
          callback: (_err, msg) => {
            if (this.mode === 'silent') return;
            const body = (codec.decode(msg.data).body ?? {}) as Record<string, unknown>;
            if (this.mode === 'refuse') {
              msg.respond(JSONCodec().encode({ ok: false, error: { status: 503, code: 'broker_unavailable', message: 'The broker refused.', retry_after: 1 } }));
              return;
            }
            log.push(body);
            msg.respond(JSONCodec().encode({ ok: true, status: 200, body: {} }));
          },
        }),
      );
    }
  }

  close(): void {
    for (const s of this.subs) s.unsubscribe();
  }
}

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
