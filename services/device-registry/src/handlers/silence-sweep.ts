import { Events, type NatsConnection } from 'nats';
import { PeriodicJob, type Logger } from '@fleet/service-kit';
import { disconnectSilent } from '../store/connectivity';
import type { RegistryDb } from '../store/prisma';

export interface SilenceSweepOptions {
  /** The connectivity stream and the durable consumer that stores its batches (shared by every replica). */
  stream: string;
  durable: string;
  /** A connected device with no report for this long is disconnected. */
  silenceSeconds: number;
  intervalMs: number;
  /**
   * How long contact with JetStream must have held (and the consumer been readable) before a
   * sweep. Bridges keep the batches they could not publish while NATS was away and send them
   * once they reach it again (each within a second of its own reconnection): until then the
   * consumer has nothing pending although reports are missing. Default 60 s.
   */
  settleMs?: number;
  /** How long the consumer's state may take to read (default 5 s). */
  infoTimeoutMs?: number;
}

/**
 * What one sweep did: the devices it disconnected, judging silence as of `asOf` (epoch ms), or
 * why it judged nobody.
 */
export type SweepOutcome = { disconnected: string[]; asOf: number } | { skipped: 'unreachable' | 'settling' | 'backlog'; detail: Record<string, unknown> };

/**
 * The silence sweep (spec: a connected device with no report from the broker for about 25
 * minutes becomes disconnected), run only while the stored reports are current.
 *
 * last_seen_at is only as recent as the connectivity consumer's progress. After a registry
 * outage, with the consumer stalled, or while bridges hold batches because NATS was away, it
 * lags behind what the devices did; a sweep then would disconnect devices that never went quiet
 * (a device.disconnected for partners), and the backlog would connect them again (a second
 * event and a new status_changed_at). So a sweep first reads the durable consumer's state from
 * JetStream, which covers every replica sharing it, contact with JetStream having held for
 * `settleMs`. With nothing waiting (num_pending) or delivered but not yet stored
 * (num_ack_pending, acknowledged after the commit), silence is measured up to the moment before
 * that read. With a backlog, it is measured up to when the oldest report not yet stored reached
 * the stream (the message after the consumer's ack floor): everything before it is in the
 * database. A busy consumer (always a batch in flight) so delays judgment by its lag only, and
 * after an outage devices are judged as of when the outage began.
 */
export class SilenceSweep {
  private readonly job: PeriodicJob;
  private readonly settleMs: number;
  /** Since when contact with JetStream has held (reset by a disconnection or an unreadable consumer). */
  private contactSince = Date.now();
  private connected = true;
  /** When the sweeps began to be skipped (0: the last one ran). */
  private skippingSince = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly db: RegistryDb,
    private readonly options: SilenceSweepOptions,
    private readonly logger: Logger,
    private readonly outbox?: { nudge(): void },
  ) {
    this.settleMs = options.settleMs ?? 60_000;
    this.job = new PeriodicJob('silence-sweep', options.intervalMs, async () => void (await this.runOnce()), logger);
    // Followed from the start, so an outage between two sweeps is not missed.
    void this.watchConnection();
  }

  start(): void {
    this.contactSince = Date.now();
    // The first sweep that can judge anyone comes after the settle time.
    this.job.start(this.settleMs);
  }

  stop(): Promise<void> {
    return this.job.stop();
  }

  /** One sweep, now: disconnects the silent devices if the stored reports are current. */
  async runOnce(): Promise<SweepOutcome> {
    const readAt = Date.now();
    const current = await this.currentness(readAt);
    if ('reason' in current) {
      const outcome: SweepOutcome = { skipped: current.reason, detail: current.detail };
      if (this.skippingSince === 0) this.skippingSince = readAt;
      const skippingMs = readAt - this.skippingSince;
      // Skipping for longer than the silence window means truly silent devices are kept connected.
      const level = skippingMs > this.options.silenceSeconds * 1000 ? 'warn' : 'info';
      this.logger[level]({ reason: current.reason, ...current.detail, skippingMs }, 'silence sweep skipped: stored connectivity is not current');
      return outcome;
    }
    this.skippingSince = 0;
    const { asOf } = current;
    const disconnected = await disconnectSilent(this.db, this.options.silenceSeconds, new Date(asOf));
    if (disconnected.length > 0) {
      this.logger.info({ count: disconnected.length, lag_ms: readAt - asOf }, 'disconnected silent devices');
      this.outbox?.nudge();
    }
    return { disconnected, asOf };
  }

  /** Up to when the stored reports are complete, or why that cannot be known now. */
  private async currentness(readAt: number): Promise<{ reason: 'unreachable' | 'settling' | 'backlog'; detail: Record<string, unknown> } | { asOf: number }> {
    const { stream, durable } = this.options;
    if (!this.connected || this.nc.isClosed()) return { reason: 'unreachable', detail: { stream, durable } };
    let info;
    let jsm;
    try {
      jsm = await this.nc.jetstreamManager({ timeout: this.options.infoTimeoutMs ?? 5000 });
      info = await jsm.consumers.info(stream, durable);
    } catch (err) {
      // JetStream out of reach (or the consumer not made yet): bridges may be holding batches too.
      this.contactSince = Date.now();
      return { reason: 'unreachable', detail: { stream, durable, err: (err as Error).message } };
    }
    const settledMs = readAt - this.contactSince;
    if (settledMs < this.settleMs) return { reason: 'settling', detail: { stream, durable, settledMs, settleMs: this.settleMs } };
    if (info.num_pending === 0 && info.num_ack_pending === 0) return { asOf: readAt };
    // Stream sequences follow arrival: the message after the ack floor (of this consumer's
    // subject or not) reached the stream no later than the oldest report not yet stored.
    const next = info.ack_floor.stream_seq + 1;
    try {
      const oldest = await jsm.streams.getMessage(stream, { seq: next });
      return { asOf: Math.min(readAt, oldest.time.getTime()) };
    } catch (err) {
      // Gone already (the stream's limits): when the backlog began is unknown.
      return { reason: 'backlog', detail: { stream, durable, pending: info.num_pending, ackPending: info.num_ack_pending, next, err: (err as Error).message } };
    }
  }

  /** Follows the connection: a disconnection suspends the sweeps until contact has held for the settle time again. */
  private async watchConnection(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (status.type === Events.Disconnect) this.connected = false;
      else if (status.type === Events.Reconnect) {
        this.connected = true;
        this.contactSince = Date.now();
      }
    }
  }
}
