import { JSONCodec, type NatsConnection, type Subscription } from 'nats';
import type { Principal, RequestEnvelope } from '@fleet/contracts';
import { Bus, createLogger, type Logger } from '@fleet/service-kit';
import { createMigratedTestDb, type TestDatabase } from '@fleet/test-kit';
import { MIGRATIONS_DIR } from '../src/migrations';
import { openLightDb, type LightDb } from '../src/store/prisma';

export { startPrivateNats, type PrivateNats } from '@fleet/test-kit';

export type TestDb = TestDatabase<LightDb>;

/** A migrated database of this test file's own. */
export const createTestDb = (): Promise<TestDb> => createMigratedTestDb('light_command_test_', MIGRATIONS_DIR, (url) => openLightDb(url, 4));

export const logger: Logger = createLogger('light-command-test', process.env.TEST_LOG_LEVEL ?? 'silent');

export async function connectBus(url: string, service = 'light-command'): Promise<Bus> {
  return Bus.connect({ servers: url, service, logger, requestTimeoutMs: 3000 });
}

export interface PublishRequest {
  topic: string;
  payload: string;
  qos: number;
  retain: boolean;
}

/**
 * Stands in for mqtt-bridge's `bridge.message.publish` (the bridge is not under test here):
 * records every publish and answers as the bridge does once the broker took it, or with
 * 503 publish_failed, or not at all.
 */
export class PublishStandIn {
  readonly published: PublishRequest[] = [];
  mode: 'ok' | 'fail' | 'silent' = 'ok';
  private readonly sub: Subscription;

  constructor(nc: NatsConnection) {
    const codec = JSONCodec<RequestEnvelope>();
    this.sub = nc.subscribe('bridge.message.publish', {
      callback: (_err, msg) => {
        if (this.mode === 'silent') return;
        if (this.mode === 'fail') {
          msg.respond(JSONCodec().encode({ ok: false, error: { status: 503, code: 'publish_failed', message: 'The broker did not take it.', retry_after: 1 } }));
          return;
        }
        const body = codec.decode(msg.data).body as unknown as PublishRequest;
        this.published.push(body);
        msg.respond(JSONCodec().encode({ ok: true, status: 200, body: { topic: body.topic, payload: body.payload, sent_at: new Date().toISOString() } }));
      },
    });
  }

  close(): void {
    this.sub.unsubscribe();
  }
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
