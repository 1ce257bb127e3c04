import { nanos, RetentionPolicy, StorageType, type JetStreamManager, type StreamConfig } from 'nats';
import type { Logger } from './logger';

/** A JetStream stream a service owns: its name, the subjects it keeps and for how long. */
export interface StreamPlan {
  name: string;
  subjects: string[];
  maxAgeMs: number;
}

/** True for JetStream's answer that the stream does not exist. */
export const isStreamNotFound = (err: unknown): boolean => /stream not found/i.test((err as Error | undefined)?.message ?? '');

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
    if (!isStreamNotFound(err)) throw err;
    try {
      await jsm.streams.add({ name: plan.name, ...wanted, storage: StorageType.File, retention: RetentionPolicy.Limits });
      logger.info({ stream: plan.name, subjects: plan.subjects, max_age_ms: plan.maxAgeMs }, 'stream created');
    } catch (addErr) {
      // Another replica created it at the same moment.
      if (!/already in use|already exists/i.test((addErr as Error).message)) throw addErr;
    }
  }
}
