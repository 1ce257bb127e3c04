import type { NatsConnection } from 'nats';
import { DurablePullConsumer, type Logger } from '@fleet/service-kit';
import { parseBatch, summarizeBatch } from '../domain/connectivity';
import { applyConnectivityEffects, recordConnectivityEvents } from '../store/connectivity';
import type { RegistryDb } from '../store/prisma';

export interface ConnectivityConsumerOptions {
  stream: string;
  durable: string;
  subject: string;
}

/**
 * Consumes the bridge's connectivity batches (DEVICE_EVENTS, durable `registry-connectivity`
 * shared by all replicas): each batch is applied in one transaction with the partner events of
 * the status changes it made, then acked; the outbox relay is nudged to publish them now.
 */
export function connectivityConsumer(nc: NatsConnection, db: RegistryDb, options: ConnectivityConsumerOptions, logger: Logger, outbox?: { nudge(): void }): DurablePullConsumer {
  return new DurablePullConsumer(nc, {
    stream: options.stream,
    durable: options.durable,
    filterSubject: options.subject,
    batch: 50,
    logger,
    process: async (messages) => {
      for (const m of messages) {
        let payload: unknown;
        try {
          payload = m.json();
        } catch {
          logger.warn({ seq: m.seq }, 'dropped a connectivity batch that is not JSON');
          continue;
        }
        const { events, rejected } = parseBatch(payload);
        if (rejected > 0) logger.warn({ seq: m.seq, rejected }, 'dropped malformed connectivity events');
        const effects = summarizeBatch(events);
        const changed = await db.$transaction(async (tx) => {
          const transitions = await applyConnectivityEffects(tx, effects);
          // The partners' device.connected / device.disconnected, committed with the status.
          await recordConnectivityEvents(tx, transitions);
          return transitions.length;
        });
        if (changed > 0) outbox?.nudge();
      }
    },
  });
}
