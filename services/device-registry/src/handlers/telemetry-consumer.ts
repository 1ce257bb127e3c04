import type { NatsConnection } from 'nats';
import { parseCaptureSubject } from '@fleet/device-protocol';
import { DurablePullConsumer, type Logger } from '@fleet/service-kit';
import type { RegistryDb } from '../store/prisma';
import { insertTelemetry, type TelemetryRow } from '../store/telemetry';

export interface TelemetryConsumerOptions {
  stream: string;
  durable: string;
  filterSubject: string;
}

/** A `dev.in.<product>.<device_id>.tele....` message as a telemetry row; null for anything else. */
export function telemetryRowOf(subject: string, headers: { get(name: string): string } | undefined, data: Uint8Array): TelemetryRow | null {
  const deviceId = parseCaptureSubject(subject)?.deviceId;
  if (!deviceId) return null;
  const topic = headers?.get('Mqtt-Topic') || '';
  const receivedAt = headers?.get('Received-At') || '';
  const createdAt = new Date(receivedAt);
  if (!topic || Number.isNaN(createdAt.getTime())) return null;
  return { deviceId, createdAt, topic, payload: Buffer.from(data).toString('utf8').split(String.fromCharCode(0)).join('') };
}

/** Stores device telemetry for GET .../health in batches (DEVICE_IN, durable `registry-telemetry`). */
export function telemetryConsumer(nc: NatsConnection, db: RegistryDb, options: TelemetryConsumerOptions, logger: Logger): DurablePullConsumer {
  return new DurablePullConsumer(nc, {
    stream: options.stream,
    durable: options.durable,
    filterSubject: options.filterSubject,
    batch: 500,
    logger,
    process: async (messages) => {
      const rows: TelemetryRow[] = [];
      for (const m of messages) {
        const row = telemetryRowOf(m.subject, m.headers, m.data);
        if (row) rows.push(row);
        else logger.debug({ subject: m.subject }, 'skipped a telemetry message without device id, topic or receive time');
      }
      await insertTelemetry(db, rows);
    },
  });
}
