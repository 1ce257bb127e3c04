import type { NatsConnection } from 'nats';
import { OutboxRelay as KitOutboxRelay, PARTNER_EVENTS_STREAM, type Logger, type OutboxDb, type OutboxRelayOptions } from '@fleet/service-kit';
import type { RegistryDb } from '../store/prisma';

/** The stream that keeps the registry's events (proto-schemas/subjects.json). */
export const REGISTRY_EVENTS_STREAM = 'REGISTRY_EVENTS';

/**
 * The registry's outbox relay: its own events to REGISTRY_EVENTS (which it owns: the relay
 * creates it) and the device events partners receive to PARTNER_EVENTS.
 */
export class OutboxRelay extends KitOutboxRelay {
  constructor(db: RegistryDb, nc: NatsConnection, logger: Logger, options: Omit<OutboxRelayOptions, 'streams'> = {}) {
    super(db as unknown as OutboxDb, nc, logger, { ...options, streams: [REGISTRY_EVENTS_STREAM, PARTNER_EVENTS_STREAM] });
  }
}
