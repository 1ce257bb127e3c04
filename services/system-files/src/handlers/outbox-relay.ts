import type { NatsConnection } from 'nats';
import { OutboxRelay, PARTNER_EVENTS_STREAM, type Logger, type OutboxDb, type OutboxRelayOptions } from '@fleet/service-kit';
import type { SystemDb } from '../store/prisma';

/**
 * system-files' outbox relay: the partner events it writes with its changes (response feed rows,
 * settled file transfers) to PARTNER_EVENTS, which the relay creates or updates.
 */
export function partnerEventsRelay(db: SystemDb, nc: NatsConnection, logger: Logger, options: Omit<OutboxRelayOptions, 'streams'> = {}): OutboxRelay {
  return new OutboxRelay(db as unknown as OutboxDb, nc, logger, { ...options, streams: [PARTNER_EVENTS_STREAM] });
}

/**
 * The relay as the intake and the transfer sweep see it: told that partner events just
 * committed, it publishes them now rather than at its next poll (nobody waits for that).
 */
export interface RelayWaker {
  wake(): Promise<void>;
}
