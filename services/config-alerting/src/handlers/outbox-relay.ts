import type { NatsConnection } from 'nats';
import { OutboxRelay, PARTNER_EVENTS_STREAM, type Logger, type OutboxDb, type OutboxRelayOptions } from '@fleet/service-kit';
import type { ConfigDb } from '../store/prisma';

/**
 * config-alerting's outbox relay: the partner events the evaluation cycle writes with the levels
 * it stores (alert.level_changed) to PARTNER_EVENTS, which the relay creates or updates.
 */
export function partnerEventsRelay(db: ConfigDb, nc: NatsConnection, logger: Logger, options: Omit<OutboxRelayOptions, 'streams'> = {}): OutboxRelay {
  return new OutboxRelay(db as unknown as OutboxDb, nc, logger, { ...options, streams: [PARTNER_EVENTS_STREAM] });
}
