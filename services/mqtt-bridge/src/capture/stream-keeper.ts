import { ErrorCode, type JetStreamManager, type NatsError } from 'nats';
import { ensureStream, type Logger, type StreamPlan } from '@fleet/service-kit';

/** JetStream's answer when no stream takes a subject: a 503 status (no responders). */
export function isNoStream(err: unknown): boolean {
  return (err as NatsError | undefined)?.code === ErrorCode.NoResponders;
}

/**
 * The bridge's streams, made at start and made again when a capture finds no stream to take it
 * (a stream deleted by hand, a JetStream store lost): device messages wait in the broker
 * meanwhile, so nothing is lost, and no restart of the bridge is needed. At most one attempt
 * per interval, whatever the number of captures failing at once.
 */
export class StreamKeeper {
  private attempt?: Promise<void>;
  private lastAttemptAt = 0;

  constructor(
    private readonly jsm: JetStreamManager,
    private readonly plans: readonly StreamPlan[],
    private readonly logger: Logger,
    private readonly minIntervalMs = 5000,
  ) {}

  async ensureAll(): Promise<void> {
    for (const plan of this.plans) await ensureStream(this.jsm, plan, this.logger);
  }

  /** A capture found no stream: make the streams again unless that was tried just now. */
  missing(): void {
    if (this.attempt || Date.now() - this.lastAttemptAt < this.minIntervalMs) return;
    this.lastAttemptAt = Date.now();
    this.logger.warn({ streams: this.plans.map((p) => p.name) }, 'a capture found no stream; making the streams again');
    this.attempt = this.ensureAll()
      .catch((err: unknown) => this.logger.warn({ err: (err as Error).message }, 'streams could not be made again; will try at the next failed capture'))
      .finally(() => {
        this.attempt = undefined;
      });
  }
}
