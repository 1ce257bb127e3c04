/**
 * Moves committed events from a service's outbox (outbox.ts) to JetStream. See OutboxRelay.
 */
import type { NatsConnection } from 'nats';
import { checkEvent, type EventPayloads, type EventSubject } from '@fleet/contracts';
import { eventStreamPlan, publishDurable } from './durable-events';
import type { Logger } from './logger';
import { deleteEvents, hasPendingEvents, pendingEvents, PARTNER_EVENTS_STREAM, tryLockRelay, type OutboxDb, type PendingEvent } from './outbox';
import { ensureStream } from './streams';

/**
 * 'outbox' in ASCII: beyond the int4 range of `hashtext` keys (per-device locks), so no such
 * lock ever takes the relay's key.
 */
const RELAY_LOCK_KEY = 0x6f7574626f78n;

/** Events published at once, then acknowledged together. */
const PUBLISH_WINDOW = 64;
/** Events published per transaction (the relay's lock is held meanwhile). */
const BATCH = 500;
/** A pass stops taking events after this long, so its transaction never runs into Prisma's timeout. */
const PASS_BUDGET_MS = 10_000;
const FIRST_RETRY_MS = 100;
const MAX_RETRY_MS = 2_000;

export interface OutboxRelayOptions {
  /** The streams of the events this service writes to its outbox (created or updated by the relay). */
  streams: string[];
  /** The advisory lock every replica's relay of this service takes (one pass at a time). */
  lockKey?: bigint;
  /** How often to look for events committed elsewhere: by another replica, or by the staff CLI. */
  pollIntervalMs?: number;
  /** How long a publish or a stream check waits for JetStream. */
  natsTimeoutMs?: number;
}

/**
 * Publishes the events waiting in the outbox to their streams, oldest first, deleting each
 * only once JetStream stored it (at least once: the row's msg_id as Nats-Msg-Id lets JetStream
 * drop a repeat within its duplicate window). One pass at a time across every replica (an
 * advisory lock held by the pass's transaction), so the stream gets the events in outbox order.
 * While JetStream or the database is out of reach, events wait in the outbox and passes are
 * retried, backing off up to 2 s.
 */
export class OutboxRelay {
  private readonly pollIntervalMs: number;
  private readonly natsTimeoutMs: number;
  private running = false;
  private loop?: Promise<void>;
  private woken = false;
  /** Wake-ups waiting for the next pass to end. */
  private waitingForPass: Array<() => void> = [];
  private interruptPause?: (stopping: boolean) => void;
  private streamReady = false;
  private outageSince?: number;
  private readonly streams: string[];
  private readonly relayedSubjects: ReadonlySet<string>;
  private readonly lockKey: bigint;

  constructor(
    private readonly db: OutboxDb,
    private readonly nc: NatsConnection,
    private readonly logger: Logger,
    options: OutboxRelayOptions,
  ) {
    this.pollIntervalMs = options.pollIntervalMs ?? 1_000;
    this.natsTimeoutMs = options.natsTimeoutMs ?? 2_000;
    this.streams = options.streams;
    this.relayedSubjects = new Set(options.streams.flatMap((stream) => eventStreamPlan(stream).subjects));
    this.lockKey = options.lockKey ?? RELAY_LOCK_KEY;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /**
   * A change and its event just committed in this process: relays now rather than at the next
   * poll. Resolves once a pass that began after the call is over (its events published, or the
   * attempt failed and they wait in the outbox), or after `withinMs`, whichever comes first: the
   * caller answers after its event, so services that drop cached views on it (the gateway's
   * scope cache) have dropped them when the partner sees the answer.
   */
  wake(withinMs = 1_000): Promise<void> {
    this.woken = true;
    const relayed = new Promise<void>((resolve) => this.waitingForPass.push(resolve));
    this.interruptPause?.(false);
    if (!this.running) this.settle(this.waitingForPass.splice(0));
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, withinMs)));
    return Promise.race([relayed, gaveUp]).finally(() => clearTimeout(timer));
  }

  /** Events just committed in this process: the relay publishes them now instead of at its next poll, without waiting. */
  nudge(): void {
    this.woken = true;
    this.interruptPause?.(false);
  }

  private settle(waiters: Array<() => void>): void {
    for (const resolve of waiters) resolve();
  }

  /** Lets the pass under way finish (what it published is deleted) and stops. */
  async stop(): Promise<void> {
    this.running = false;
    this.interruptPause?.(true);
    await this.loop;
  }

  private async run(): Promise<void> {
    let retryMs = 0;
    while (this.running) {
      // Whoever woke the relay before this pass began is answered when it ends.
      const waiters = this.waitingForPass.splice(0);
      try {
        const more = await this.relayPass();
        this.recovered();
        retryMs = 0;
        this.settle(waiters);
        if (!more) await this.pause(this.pollIntervalMs, true);
      } catch (err) {
        this.settle(waiters);
        // The stream may be what is missing (a NATS server that lost its store).
        this.streamReady = false;
        retryMs = Math.min(MAX_RETRY_MS, Math.max(FIRST_RETRY_MS, retryMs * 2));
        this.failed(err, retryMs);
        // Wake-ups wait too: during an outage, each commit would otherwise cost an attempt.
        await this.pause(retryMs, false);
      }
    }
    this.settle(this.waitingForPass.splice(0));
  }

  /** Publishes waiting events in order; true when more may be waiting already. */
  private async relayPass(): Promise<boolean> {
    // Cleared before reading the outbox: a commit from now on wakes the next pass.
    this.woken = false;
    if (!this.streamReady) {
      const jsm = await this.nc.jetstreamManager({ timeout: this.natsTimeoutMs });
      for (const stream of this.streams) await ensureStream(jsm, eventStreamPlan(stream), this.logger);
      this.streamReady = true;
    }
    if (!(await hasPendingEvents(this.db))) return false;
    let failure: unknown;
    const more = await this.db.$transaction(
      async (tx) => {
        // Another replica is relaying; its passes publish these events in order.
        if (!(await tryLockRelay(tx, this.lockKey))) return false;
        const events = await pendingEvents(tx, BATCH);
        const published: bigint[] = [];
        const until = Date.now() + PASS_BUDGET_MS;
        // Publishes go out in windows, each sent at once and acknowledged together: one connection
        // delivers them to JetStream in order, and a window costs one round trip, not one per event.
        for (let start = 0; start < events.length && failure === undefined; start += PUBLISH_WINDOW) {
          if (!this.running || Date.now() > until) break;
          const window = events.slice(start, start + PUBLISH_WINDOW);
          const results = await Promise.allSettled(window.map((event) => this.publish(event)));
          for (const [i, result] of results.entries()) {
            // Only the events before the first failure are done; those after it are published again
            // with the next pass (their Nats-Msg-Id lets JetStream drop a second copy).
            if (result.status === 'rejected') {
              failure = result.reason;
              break;
            }
            published.push((window[i] as PendingEvent).id);
          }
        }
        await deleteEvents(tx, published);
        return events.length === BATCH || published.length < events.length;
      },
      { maxWait: 5_000, timeout: PASS_BUDGET_MS + this.natsTimeoutMs + 5_000 },
    );
    if (failure !== undefined) throw failure;
    return more;
  }

  private async publish(event: PendingEvent): Promise<void> {
    const rejection = this.rejectionOf(event);
    if (rejection !== undefined) {
      // Kept, it would hold back every later event forever.
      this.logger.error({ outbox_id: String(event.id), subject: event.subject, rejection }, 'dropped an outbox event that proto-schemas no longer accepts');
      return;
    }
    const subject = event.subject as EventSubject;
    await publishDurable(this.nc, subject, event.payload as EventPayloads[typeof subject], { id: event.msgId, timeoutMs: this.natsTimeoutMs });
  }

  private pause(ms: number, wakeable: boolean): Promise<void> {
    if (!this.running || (wakeable && this.woken)) return Promise.resolve();
    return new Promise((resolve) => {
      const end = (): void => {
        clearTimeout(timer);
        this.interruptPause = undefined;
        resolve();
      };
      const timer = setTimeout(end, ms);
      timer.unref();
      this.interruptPause = (stopping) => {
        if (stopping || wakeable) end();
      };
    });
  }

  private failed(err: unknown, retryMs: number): void {
    if (this.outageSince !== undefined) {
      this.logger.debug({ err, retry_in_ms: retryMs }, 'relaying outbox events failed again');
      return;
    }
    this.outageSince = Date.now();
    this.logger.warn({ err }, 'outbox events cannot be relayed; they wait in the outbox and are retried');
  }

  private recovered(): void {
    if (this.outageSince === undefined) return;
    this.logger.info({ outage_ms: Date.now() - this.outageSince }, 'relaying outbox events again');
    this.outageSince = undefined;
  }

  /** Why proto-schemas no longer accepts a stored event, or undefined when it does. */
  private rejectionOf(event: PendingEvent): string | undefined {
    if (!this.relayedSubjects.has(event.subject)) return `${event.subject} is not an event of ${this.streams.join(' or ')}`;
    try {
      checkEvent(event.subject as EventSubject, event.payload);
      return undefined;
    } catch (err) {
      return (err as Error).message;
    }
  }
}

/** What code that commits events needs of the relay: to be told, so it publishes them now. */
export interface OutboxNudge {
  nudge(): void;
}

/**
 * The relay of a service whose outbox holds partner events only (push events): to
 * PARTNER_EVENTS, which it creates or updates. `db` is the service's Prisma client (the relay
 * uses its raw statements and interactive transactions only).
 */
export function partnerEventsRelay(db: object, nc: NatsConnection, logger: Logger, options: Omit<OutboxRelayOptions, 'streams'> = {}): OutboxRelay {
  return new OutboxRelay(db as OutboxDb, nc, logger, { ...options, streams: [PARTNER_EVENTS_STREAM] });
}
