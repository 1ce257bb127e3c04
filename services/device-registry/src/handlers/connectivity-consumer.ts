import type { NatsConnection } from 'nats';
import { DurablePullConsumer, type Logger } from '@fleet/service-kit';
import { parseBatch, summarizeBatch, type ConnectivityEvent } from '../domain/connectivity';
import { applyConnectivityEffects, recordConnectivityEvents } from '../store/connectivity';
import type { RegistryDb } from '../store/prisma';

export interface ConnectivityConsumerOptions {
  stream: string;
  durable: string;
  subject: string;
}

/**
 * Consumes the bridge's connectivity batches (DEVICE_EVENTS, durable `registry-connectivity`
 * shared by all replicas): the batches of a pull are applied in as few transactions as keep each
 * device's batches in order, each with the partner events of the status changes it made, then
 * acked; the outbox relay is nudged to publish the events now.
 */
export function connectivityConsumer(nc: NatsConnection, db: RegistryDb, options: ConnectivityConsumerOptions, logger: Logger, outbox?: { nudge(): void }): DurablePullConsumer {
  return new DurablePullConsumer(nc, {
    stream: options.stream,
    durable: options.durable,
    filterSubject: options.subject,
    batch: 50,
    logger,
    process: async (messages) => {
      // Batches that name disjoint devices are applied together, in one transaction: under load
      // that is one commit for many batches. A device named again starts a new group, so each
      // device's batches still apply one after the other, as they were published.
      let group: ConnectivityEvent[] = [];
      let devices = new Set<string>();
      const flush = async (): Promise<void> => {
        if (group.length === 0) return;
        const effects = summarizeBatch(group);
        group = [];
        devices = new Set();
        const changed = await db.$transaction(async (tx) => {
          const transitions = await applyConnectivityEffects(tx, effects);
          // The partners' device.connected / device.disconnected, committed with the status.
          await recordConnectivityEvents(tx, transitions);
          return transitions.length;
        });
        if (changed > 0) outbox?.nudge();
      };
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
        const named = new Set(events.map((e) => e.device_id));
        if ([...named].some((id) => devices.has(id))) await flush();
        group.push(...events);
        for (const id of named) devices.add(id);
      }
      await flush();
    },
  });
}
