import { nanos, RetentionPolicy, StorageType, type JetStreamManager, type StreamConfig } from 'nats';
import type { Logger } from '@fleet/service-kit';

export interface StreamPlan {
  name: string;
  subjects: string[];
  maxAgeMs: number;
}

/** DEVICE_IN: every device message (dev.in.>) and every message sent to a device (dev.out.>). */
export function deviceInStream(name: string, prefix: string, retentionHours: number): StreamPlan {
  return { name, subjects: [`${prefix}dev.in.>`, `${prefix}dev.out.>`], maxAgeMs: Math.round(retentionHours * 3_600_000) };
}

/** DEVICE_EVENTS: the bridge's events (evt.bridge.>), kept 7 days. */
export function deviceEventsStream(name: string, prefix: string): StreamPlan {
  return { name, subjects: [`${prefix}evt.bridge.>`], maxAgeMs: 7 * 24 * 3_600_000 };
}

/**
 * Creates the stream (file storage, limits retention) when missing; an existing one keeps its
 * data and gets this subject list and retention window.
 */
export async function ensureStream(jsm: JetStreamManager, plan: StreamPlan, logger: Logger): Promise<void> {
  const wanted: Partial<StreamConfig> = { subjects: plan.subjects, max_age: nanos(plan.maxAgeMs) };
  try {
    const info = await jsm.streams.info(plan.name);
    const same = info.config.max_age === wanted.max_age && info.config.subjects.length === plan.subjects.length && plan.subjects.every((s) => info.config.subjects.includes(s));
    if (!same) {
      await jsm.streams.update(plan.name, { ...info.config, ...wanted });
      logger.info({ stream: plan.name, subjects: plan.subjects, max_age_ms: plan.maxAgeMs }, 'stream updated');
    }
  } catch (err) {
    if (!/stream not found/i.test((err as Error).message)) throw err;
    try {
      await jsm.streams.add({ name: plan.name, ...wanted, storage: StorageType.File, retention: RetentionPolicy.Limits });
      logger.info({ stream: plan.name, subjects: plan.subjects, max_age_ms: plan.maxAgeMs }, 'stream created');
    } catch (addErr) {
      // Another replica created it at the same moment.
      if (!/already in use|already exists/i.test((addErr as Error).message)) throw addErr;
    }
  }
}
