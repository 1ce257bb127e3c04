import type { NatsConnection } from 'nats';
import { parseCaptureSubject } from '@fleet/device-protocol';
import { DurablePullConsumer, type Logger } from '@fleet/service-kit';
import { parseReading, type Reading } from '../domain/reading';
import type { ConfigDb } from '../store/prisma';
import { storeReadings } from '../store/readings';

export interface ReadingsConsumerOptions {
  stream: string;
  durable: string;
  filterSubject: string;
  batch: number;
}

/**
 * Stores the sensor readings lights relay (DEVICE_IN `dev.in.light.<id>.tdl.<tdl_id>`), one
 * statement per batch, acknowledged after the commit; each reading is stored once however often
 * it is delivered (natural key). The sensor id is read from the MQTT topic (Mqtt-Topic header),
 * since a subject token cannot hold its '.' characters. A message that is no reading is logged
 * and never retried.
 */
export function readingsConsumer(nc: NatsConnection, db: ConfigDb, options: ReadingsConsumerOptions, logger: Logger): DurablePullConsumer {
  return new DurablePullConsumer(nc, {
    ...options,
    // Readings commit in any order (each is keyed by its own time): two batches at once keep
    // Postgres busy while the next batch is decoded.
    concurrentBatches: 2,
    logger,
    process: async (messages) => {
      const readings: Reading[] = [];
      const poison = new Set<(typeof messages)[number]>();
      for (const m of messages) {
        const captured = parseCaptureSubject(m.subject);
        const topic = m.headers?.get('Mqtt-Topic') ?? '';
        const receivedAt = new Date(m.headers?.get('Received-At') || Date.now());
        const parsed = captured && captured.product === 'light' ? parseReading(captured.deviceId, topic, m.data, Number.isNaN(receivedAt.getTime()) ? new Date() : receivedAt) : { ok: false as const, reason: 'not a light message' };
        if (parsed.ok) readings.push(parsed.reading);
        else {
          poison.add(m);
          logger.warn({ subject: m.subject, reason: parsed.reason }, 'dropped a sensor reading the protocol does not allow');
        }
      }
      // In key order, so two batches holding the same redelivered reading never wait on each other crosswise.
      readings.sort((a, b) => (a.deviceId < b.deviceId ? -1 : a.deviceId > b.deviceId ? 1 : a.tdlId < b.tdlId ? -1 : a.tdlId > b.tdlId ? 1 : a.at.getTime() - b.at.getTime()));
      await storeReadings(db, readings);
      return poison;
    },
  });
}
