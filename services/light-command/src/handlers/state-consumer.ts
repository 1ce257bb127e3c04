import type { NatsConnection } from 'nats';
import { parseCaptureSubject } from '@fleet/device-protocol';
import { isChannel } from '@fleet/light-wire';
import { DurablePullConsumer, type Logger } from '@fleet/service-kit';
import type { LightDb } from '../store/prisma';
import { storeStates, type StateReport } from '../store/states';

export interface StateConsumerOptions {
  stream: string;
  durable: string;
  filterSubject: string;
}

/**
 * A light's state report from its DEVICE_IN message, `dev.in.light.<device_id>.state.<channel>`;
 * updated_at is the bridge's Received-At header.
 */
export function stateReportOf(subject: string, headers: { get(name: string): string } | undefined, data: Uint8Array): StateReport | null {
  const captured = parseCaptureSubject(subject);
  if (!captured || captured.direction !== 'in' || captured.product !== 'light') return null;
  const [state, channel, ...rest] = captured.tokens;
  const deviceId = captured.deviceId;
  if (state !== 'state' || rest.length > 0 || !isChannel(channel)) return null;
  const updatedAt = new Date(headers?.get('Received-At') || '');
  if (Number.isNaN(updatedAt.getTime())) return null;
  return { deviceId, channel, payload: Buffer.from(data).toString('utf8'), updatedAt };
}

/** Keeps the last reported state per light channel (DEVICE_IN, durable `light-command-state`), within about 50 ms of the report. */
export function stateConsumer(nc: NatsConnection, db: LightDb, options: StateConsumerOptions, logger: Logger): DurablePullConsumer {
  return new DurablePullConsumer(nc, {
    ...options,
    batch: 500,
    // A light reports its state after every command: one upsert per 50 ms of reports instead of
    // one per report keeps that write off the path of the commands that follow.
    lingerMs: 50,
    logger,
    process: async (messages) => {
      const reports: StateReport[] = [];
      for (const m of messages) {
        const report = stateReportOf(m.subject, m.headers, m.data);
        if (report) reports.push(report);
        else logger.debug({ subject: m.subject }, 'skipped a message that is no light state report');
      }
      await storeStates(db, reports);
    },
  });
}
