import type { NatsConnection } from 'nats';
import { DurablePullConsumer, type Logger } from '@fleet/service-kit';
import { parseBatch, summarizeBatch } from '../domain/connectivity';
import { applyConnectivityEffects } from '../store/connectivity';
import type { RegistryDb } from '../store/prisma';

export interface ConnectivityConsumerOptions {
  stream: string;
  durable: string;
  subject: string;
}

/**
 * Consumes the bridge's connectivity batches (DEVICE_EVENTS, durable `registry-connectivity`
 * shared by all replicas): each batch is applied in one transaction, then acked.
 */
export function connectivityConsumer(nc: NatsConnection, db: RegistryDb, options: ConnectivityConsumerOptions, logger: Logger): DurablePullConsumer {
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
        await db.$transaction(async (tx) => {
          await applyConnectivityEffects(tx, effects);
        });
      }
    },
  });
}
