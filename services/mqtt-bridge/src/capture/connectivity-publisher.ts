import { JSONCodec, type JetStreamClient } from 'nats';
import { checkEvent, type EventSubject } from '@fleet/contracts';
import type { Logger } from '@fleet/service-kit';
import { chunk, ConnectivityAggregator, type ConnectivityEvent } from '../domain/connectivity';
import type { Product } from '../domain/topics';
import { isNoStream } from './stream-keeper';

const EVENT_SUBJECT: EventSubject = 'evt.bridge.connectivity.batch.v1';
const codec = JSONCodec<unknown>();

/**
 * A device heard from again after this long is published at once, like a first message: longer
 * than a heartbeat period (5 minutes by the device protocol), shorter than the registry's
 * silence rule (25 minutes by default).
 */
const SILENCE_COUNTS_AS_GONE_MS = 10 * 60_000;

export interface ConnectivityPublisherOptions {
  js: JetStreamClient;
  subjectPrefix: string;
  stream: string;
  flushMs: number;
  maxEvents: number;
  logger: Logger;
  /** Called when no stream took a batch (it is published again later). */
  onNoStream?: () => void;
}

/**
 * Collects presence from device traffic and publishes it to DEVICE_EVENTS as
 * evt.bridge.connectivity.batch.v1, every flushMs or as soon as maxEvents are waiting; each
 * JetStream publish is awaited. A batch that could not be published is kept and sent first
 * next time, so nothing is lost while NATS is away.
 *
 * A change of presence is published at once, with whatever else waits: a device's first message
 * since this bridge started, since its `offline` or after ten minutes of silence, and every
 * `offline`. So the registry learns that a device connected within a publish of its first
 * message, not at the end of a window; only the `seen` of devices already known to be present
 * waits for the flush.
 */
export class ConnectivityPublisher {
  private readonly aggregator = new ConnectivityAggregator();
  private backlog: ConnectivityEvent[][] = [];
  private timer?: NodeJS.Timeout;
  private flushing?: Promise<void>;
  private flushAgain = false;
  /** When this bridge last heard from each device present (gone offline: not held). */
  private readonly present = new Map<string, number>();

  constructor(private readonly options: ConnectivityPublisherOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.options.flushMs);
  }

  record(deviceId: string, product: Product, receivedAt: number, offline: boolean): void {
    this.aggregator.record(deviceId, product, receivedAt, offline);
    const previous = this.present.get(deviceId);
    // After a long silence the registry may have disconnected the device (its silence rule)
    // while this bridge still holds it present: that `seen` is a change of presence too.
    const changed = offline || previous === undefined || receivedAt - previous > SILENCE_COUNTS_AS_GONE_MS;
    if (offline) this.present.delete(deviceId); // nothing kept of a device that left
    else this.present.set(deviceId, Math.max(previous ?? receivedAt, receivedAt));
    if (changed || this.aggregator.size >= this.options.maxEvents) void this.flush();
  }

  /**
   * Publishes everything recorded so far; concurrent calls share one run, and a call during a
   * run starts another right after it, so what was recorded after its last drain is not left
   * for the next window.
   */
  flush(): Promise<void> {
    if (this.flushing) {
      this.flushAgain = true;
      return this.flushing;
    }
    this.flushing = this.publishAll().finally(() => {
      this.flushing = undefined;
      if (this.flushAgain) {
        this.flushAgain = false;
        void this.flush();
      }
    });
    return this.flushing;
  }

  private async publishAll(): Promise<void> {
    // Batches from one window each, so a device has at most one `seen` per batch.
    this.backlog.push(...chunk(this.aggregator.drain(), this.options.maxEvents));
    while (this.backlog.length > 0) {
      const batch = this.backlog[0] as ConnectivityEvent[];
      const payload = checkEvent<{ events: ConnectivityEvent[] }>(EVENT_SUBJECT, { events: batch });
      try {
        await this.options.js.publish(`${this.options.subjectPrefix}${EVENT_SUBJECT}`, codec.encode(payload), { expect: { streamName: this.options.stream } });
      } catch (err) {
        if (isNoStream(err)) this.options.onNoStream?.();
        this.options.logger.warn({ err: (err as Error).message, batches: this.backlog.length }, 'connectivity batch not published; will retry');
        return;
      }
      this.backlog.shift();
      if (this.backlog.length === 0) this.backlog.push(...chunk(this.aggregator.drain(), this.options.maxEvents));
    }
  }

  /** Stops the schedule and publishes what is left. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
    if (this.aggregator.size > 0 || this.backlog.length > 0) await this.flush();
  }
}
