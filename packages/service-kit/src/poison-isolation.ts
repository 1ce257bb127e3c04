import type { JsMsg } from 'nats';
import { isStoreOutage } from './errors';
import type { Logger } from './logger';

/** Deliveries after which a message that fails on its own is dropped. */
const MAX_DELIVERIES = 10;

/**
 * A DurablePullConsumer `process` that stores a batch in one go and, when that fails, finds the
 * messages that fail on their own: each is tried alone, those that still fail while others
 * succeed are poison (returned, so they are terminated and logged) and never block the rest.
 * When every message fails, or any failure is the store out of reach (isStoreOutage), no message
 * is at fault: the error is thrown and the whole batch redelivered, however long the outage lasts
 * (what was stored before is stored once, by the store's own keys). A lone message that keeps
 * failing otherwise is dropped after MAX_DELIVERIES deliveries, so it cannot hold the stream
 * forever. `read` decodes a message (null: not one of ours, acknowledged as is).
 */
export function isolatingPoison<T>(options: { read: (msg: JsMsg, now: Date) => T | null; store: (items: T[]) => Promise<void>; logger: Logger }) {
  const { read: decode, store, logger } = options;
  return async function process(batch: JsMsg[]): Promise<Set<JsMsg>> {
    const now = new Date();
    const read = new Map<JsMsg, T>();
    for (const msg of batch) {
      const item = decode(msg, now);
      if (item !== null) read.set(msg, item);
    }
    try {
      await store([...read.values()]);
      return new Set();
    } catch (err) {
      if (isStoreOutage(err)) throw err;
      if (read.size <= 1) {
        const [only] = read.keys();
        if (only && only.info.redeliveryCount >= MAX_DELIVERIES) {
          logger.error({ err: (err as Error).message, subject: only.subject, seq: only.seq }, 'device message could not be stored; dropped');
          return new Set([only]);
        }
        throw err;
      }
      logger.warn({ err: (err as Error).message, count: read.size }, 'batch failed; trying its messages one by one');
    }
    const poison = new Set<JsMsg>();
    let lastErr: unknown;
    for (const [msg, item] of read) {
      try {
        await store([item]);
      } catch (err) {
        if (isStoreOutage(err)) {
          logger.warn({ count: read.size }, 'the store went away while a failed batch was retried message by message; the whole batch is redelivered');
          throw err;
        }
        lastErr = err;
        poison.add(msg);
      }
    }
    if (poison.size === read.size) throw lastErr;
    for (const msg of poison) logger.error({ subject: msg.subject, seq: msg.seq }, 'device message could not be stored; dropped');
    return poison;
  };
}
