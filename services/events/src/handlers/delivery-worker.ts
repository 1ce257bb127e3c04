/**
 * Sends due deliveries. Every replica runs one; they share the work through leases (see
 * claimDue): a delivery is sent by one replica at a time, and one whose replica died is taken
 * again when its lease runs out. At most WEBHOOK_CONCURRENCY deliveries are in flight per replica
 * and WEBHOOK_CONCURRENCY_PER_ENDPOINT per endpoint, each bounded by WEBHOOK_TIMEOUT_MS, so a
 * slow or failing endpoint holds only its own share and never delays another partner's.
 */
import { inEnvelopeOrder, WEBHOOK_TEST_TYPE } from '@fleet/contracts';
import type { Logger } from '@fleet/service-kit';
import { retryDelay } from '../domain/retry-schedule';
import { deliveryAttempts, deliveryDuration, eventToDelivery } from '../metrics';
import { openSecret } from '../domain/secret-box';
import { deliveryHeaders } from '../domain/signing';
import type { ReceiverClient } from '../http/receiver-client';
import { claimDue, nextDue, settleAttempt, type ClaimedDelivery } from '../store/deliveries';
import type { EventsDb } from '../store/prisma';

/** Why a delivery was not sent: its partner may no longer receive it. */
export const WITHDRAWN = 'not sent: the partner may no longer receive this event (disabled, or its permission withdrawn)';

/** The shortest pause between looks when nothing could be taken (no busy loop while deliveries are held). */
const MIN_PAUSE_MS = 50;

export interface DeliveryWorkerOptions {
  db: EventsDb;
  /**
   * Whether the partner may still receive an event of the type (enabled, holding its permission),
   * asked before each attempt: a partner disabled or a permission withdrawn after the fan-out
   * stops its pending deliveries. Absent: every delivery is sent.
   */
  mayStillReceive?: (partnerId: string, eventType: string) => Promise<boolean>;
  client: Pick<ReceiverClient, 'post'>;
  secretsKey: Buffer;
  schedule: readonly number[];
  timeoutMs: number;
  concurrency: number;
  perEndpoint: number;
  logger: Logger;
  /** Longest pause between looks for due deliveries (others' replicas' work, retries coming due). */
  pollMs?: number;
}

export class DeliveryWorker {
  private running = false;
  private loop?: Promise<void>;
  private inFlight = 0;
  private woken = false;
  private wake?: () => void;
  private readonly sending = new Set<Promise<void>>();

  constructor(private readonly options: DeliveryWorkerOptions) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Deliveries were stored or requeued in this process: look now. */
  nudge(): void {
    this.woken = true;
    this.wake?.();
  }

  /** Stops taking deliveries and waits for those in flight (each bounded by the timeout). */
  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
    await Promise.all([...this.sending]);
  }

  private async run(): Promise<void> {
    const { db, concurrency, perEndpoint, timeoutMs, logger } = this.options;
    const pollMs = this.options.pollMs ?? 1_000;
    while (this.running) {
      this.woken = false;
      let pauseMs = pollMs;
      try {
        const free = concurrency - this.inFlight;
        if (free > 0) {
          // The lease outlasts the attempt by far: a live worker always settles before it runs out.
          const claimed = await claimDue(db, free, perEndpoint, timeoutMs + 30_000);
          for (const delivery of claimed) this.send(delivery);
          if (claimed.length === free) pauseMs = 0;
          else if (claimed.length === 0) {
            // Due ones that were not taken are held by the per-endpoint share or by another
            // replica's lease: their settling wakes this loop (locally) or the poll finds them.
            const next = await nextDue(db);
            if (next) pauseMs = Math.max(MIN_PAUSE_MS, Math.min(pollMs, next.getTime() - Date.now()));
          }
        }
      } catch (err) {
        logger.warn({ err }, 'could not take due deliveries; trying again');
      }
      if (pauseMs > 0 && this.running && !this.woken) await this.pause(pauseMs);
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = undefined;
        done();
      };
    });
  }

  private send(delivery: ClaimedDelivery): void {
    this.inFlight += 1;
    const work = this.attempt(delivery)
      .catch((err: unknown) => this.options.logger.error({ err, delivery_id: delivery.id }, 'a delivery attempt failed to settle; its lease will run out and it is sent again'))
      .finally(() => {
        this.inFlight -= 1;
        this.sending.delete(work);
        this.nudge();
      });
    this.sending.add(work);
  }

  private async attempt(delivery: ClaimedDelivery): Promise<void> {
    const { db, client, secretsKey, schedule, logger } = this.options;
    if (delivery.eventType !== WEBHOOK_TEST_TYPE && this.options.mayStillReceive && !(await this.options.mayStillReceive(delivery.partnerId, delivery.eventType))) {
      const now = new Date();
      await settleAttempt(db, delivery.id, { at: now, status: null, error: WITHDRAWN, durationMs: 0 }, { succeeded: false, retryAt: null });
      deliveryAttempts.inc({ outcome: 'withdrawn' });
      return;
    }
    const at = new Date();
    const secrets = [openSecret(secretsKey, delivery.webhookId, delivery.secret)];
    // Earlier secrets sign beside the current one until each one's expiry (rotations).
    for (const [sealed, expiresAt] of [
      [delivery.previousSecret, delivery.previousExpiresAt],
      [delivery.olderSecret, delivery.olderExpiresAt],
    ] as const) {
      if (sealed && expiresAt && expiresAt > at) secrets.push(openSecret(secretsKey, delivery.webhookId, sealed));
    }
    const body = JSON.stringify(inEnvelopeOrder(delivery.event as Record<string, unknown>));
    const outcome = await client.post(delivery.url, deliveryHeaders(secrets, delivery.eventId, at, body), body);
    // Measured when the receiver answered: a success is delivered then (`delivered_at`), not when the attempt began.
    const result = { at, status: outcome.status, error: outcome.error, durationMs: Date.now() - at.getTime() };
    deliveryDuration.observe(result.durationMs / 1000);
    if (outcome.error === null) {
      await settleAttempt(db, delivery.id, result, { succeeded: true });
      deliveryAttempts.inc({ outcome: 'succeeded' });
      const occurredAt = Date.parse((delivery.event as { occurred_at?: string }).occurred_at ?? '');
      if (delivery.attempts === 0 && Number.isFinite(occurredAt)) eventToDelivery.observe(Math.max(0, Date.now() - occurredAt) / 1000);
      return;
    }
    const delay = retryDelay(schedule, delivery.attempts + 1);
    await settleAttempt(db, delivery.id, result, { succeeded: false, retryAt: delay === null ? null : new Date(Date.now() + delay) });
    deliveryAttempts.inc({ outcome: delay === null ? 'dead' : 'retrying' });
    if (delay === null) logger.info({ delivery_id: delivery.id, webhook_id: delivery.webhookId, attempts: delivery.attempts + 1 }, 'delivery is dead after its last attempt');
  }
}
