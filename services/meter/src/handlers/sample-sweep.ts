import { counter, PeriodicJob, type Logger } from '@fleet/service-kit';
import type { MeterDb } from '../store/prisma';
import { settleExpiredSamples } from '../store/requests';

const sweptSamples = counter('fleet_meter_samples_no_reply_total', 'Live-reading requests the sweep settled as no_reply (their deadline passed without an answer).', []);

/**
 * Settles live-reading requests that passed their deadline unanswered as no_reply (with their
 * `meter.sample_settled` events) every `intervalMs`, never overlapping itself, so the event goes
 * out whether or not anyone reads the request. Every replica runs one; a request settles once
 * whoever gets there first (store/requests.ts settleExpiredSamples).
 */
export class SampleSweep {
  private readonly job: PeriodicJob;

  constructor(
    private readonly db: MeterDb,
    private readonly intervalMs: number,
    private readonly logger: Logger,
    private readonly onEvents?: () => void,
  ) {
    this.job = new PeriodicJob('no-reply-sweep', intervalMs, async () => void (await this.sweep()), logger);
  }

  start(): void {
    this.job.start(this.intervalMs);
  }

  /** One sweep now; how many requests it settled. */
  async sweep(now = new Date()): Promise<number> {
    const settled = await settleExpiredSamples(this.db, now);
    if (settled > 0) {
      sweptSamples.inc(settled);
      this.logger.debug({ settled }, 'live readings settled as no_reply');
      this.onEvents?.();
    }
    return settled;
  }

  /** Lets a sweep under way finish and stops. */
  stop(): Promise<void> {
    return this.job.stop();
  }
}
