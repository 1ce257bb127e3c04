import { warnIfFails, type Logger, type OutboxNudge } from '@fleet/service-kit';
import type { SystemDb } from '../store/prisma';
import { pruneFeed } from '../store/responses';
import { pruneTransfers, settleOverdue } from '../store/transfers';

export interface HousekeepingOptions {
  sweepMs: number;
  /** A queued transfer older than this lost its push's process before the publish's outcome was stored. */
  queuedGraceMs: number;
  transferRetentionDays: number;
  responseRetentionDays: number;
}

const DAY_MS = 86_400_000;
/** Retention runs once every this many sweeps. */
const PRUNE_EVERY = 600;

/**
 * Settles transfers past their acknowledgement deadline as timed_out (every sweepMs; each
 * replica may run it: the updates are conditional, so a transfer is settled, and its
 * file_transfer.settled event written, once) and drops transfers and feed rows past their retention.
 */
export function startHousekeeping(db: SystemDb, options: HousekeepingOptions, logger: Logger, relay?: OutboxNudge): { stop(): void } {
  let sweeps = 0;
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const now = new Date();
      const settled = await settleOverdue(db, now, new Date(now.getTime() - options.queuedGraceMs));
      if (settled > 0) {
        logger.debug({ settled }, 'overdue transfers settled');
        relay?.nudge();
      }
      if (sweeps % PRUNE_EVERY === 0) {
        await pruneTransfers(db, new Date(now.getTime() - options.transferRetentionDays * DAY_MS));
        await pruneFeed(db, new Date(now.getTime() - options.responseRetentionDays * DAY_MS));
      }
      sweeps += 1;
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => {
    tick().catch(warnIfFails(logger, 'transfer housekeeping'));
  }, options.sweepMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
