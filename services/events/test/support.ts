import { JSONCodec, type NatsConnection } from 'nats';
import type { Permission } from '@fleet/contracts';
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

/** What the stand-in for `gateway.partner.access` answers, by partner id (absent: disabled or unknown). */
export type PartnerAccessTable = Map<string, { permissions: Permission[]; org_grants: number[] }>;

/** Stands in for the gateway's `gateway.partner.access`, answering from `partners` as it is at each request. */
export function serveGatewayAccess(nc: NatsConnection, partners: PartnerAccessTable): void {
  const codec = JSONCodec();
  nc.subscribe('gateway.partner.access', {
    callback: (_err, msg) => {
      const ids = (codec.decode(msg.data) as { body: { partner_ids: string[] } }).body.partner_ids;
      const body = { partners: ids.flatMap((id) => (partners.has(id) ? [{ partner_id: id, ...partners.get(id)! }] : [])) };
      msg.respond(codec.encode({ ok: true, status: 200, body }));
    },
  });
}
