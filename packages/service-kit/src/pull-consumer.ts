import { AckPolicy, ConsumerEvents, DeliverPolicy, type ConsumerMessages, type JsMsg, type NatsConnection } from 'nats';
import type { Logger } from './logger';
import { trackConsumer, untrackConsumer } from './consumer-metrics';
import { isStreamNotFound } from './streams';

export interface PullConsumerOptions {
  stream: string;
  durable: string;
  filterSubject: string;
  /** Most messages handled per batch (one transaction). */
  batch: number;
  /**
   * Batches processed at once (default 1). More than one overlaps one batch's commit with the
   * next one's decoding; only for messages whose batches may commit in any order.
   */
  concurrentBatches?: number;
  /**
   * How long a batch that is not full may wait for more messages (default 0: handled at once).
   * For work that costs the same per batch whatever its size (one statement), under a trickle
   * of messages: fewer, larger batches, at the price of that much delay.
   */
  lingerMs?: number;
  /** Seconds a delivered message may stay unacknowledged before JetStream redelivers it (default 30). */
  ackWaitS?: number;
  /**
   * How long a consumer that has not consumed yet waits for its stream with an info line only
   * (default 30,000 ms): at a fleet's start the stream's owner (the bridge) may not have made it
   * yet, which is nobody's fault. Past this, and for any other failure, it warns.
   */
  streamWaitGraceMs?: number;
  /**
   * How often the consumer's acknowledgement floor is read while it consumes (default 30,000 ms).
   * A consumer deleted under a running fleet (its stream kept) is made again just after the last
   * floor read, so at most this much work is offered again instead of the whole stream.
   */
  ackFloorRefreshMs?: number;
  /**
   * Handles one batch; resolves once its effects are committed. May return the messages that
   * must never be retried (they are terminated); every other one is acknowledged.
   */
  process: (messages: JsMsg[]) => Promise<Set<JsMsg> | void>;
  logger: Logger;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Consecutive look-ups (one per pull expiry, 5 s) that found the consumer or its stream gone
 * before the consumer is made again. The client would otherwise wait for them to come back,
 * which a durable consumer this class made never does on its own (a stream deleted and made
 * again, a JetStream store lost). More than one: a consumer replaced at once (a filter change
 * by another replica) is only briefly missing.
 */
const MISSING_LOOKUPS_BEFORE_REMAKE = 2;

/**
 * A durable JetStream pull consumer shared by every replica of a service (JetStream hands each
 * message to one of them). Each replica keeps one long-lived pull (`consume`) topped up by the client, cuts
 * batches from what arrived, processes each and acknowledges it only after the commit; a batch
 * that fails is redelivered. At most 20,000 messages are unacknowledged across replicas, which
 * bounds what a replica buffers. Waits for the stream when it does not exist yet (the bridge makes it).
 */
export class DurablePullConsumer {
  private running = false;
  private loop?: Promise<void>;
  private ensured = false;
  /** Consuming started at least once since start(). */
  private consumed = false;
  /**
   * Where a consumer made again resumes: the stream it read (by when that stream was made) and
   * the highest acknowledgement floor read from it. Every message up to the floor was settled.
   */
  private resumePoint?: { streamCreated: string; ackFloor: number };

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: PullConsumerOptions,
  ) {}

  /** The highest acknowledgement floor this replica has read: a consumer made again resumes just after it (0: none read yet). */
  get acknowledgedThrough(): number {
    return this.resumePoint?.ackFloor ?? 0;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    trackConsumer(this.nc, this.options.stream, this.options.durable);
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    untrackConsumer(this.options.stream, this.options.durable);
    await this.loop;
  }

  private async ensureConsumer(): Promise<void> {
    if (this.ensured) return;
    const { stream, durable, filterSubject, ackWaitS = 30 } = this.options;
    const jsm = await this.nc.jetstreamManager();
    const existing = await jsm.consumers.info(stream, durable).catch(() => undefined);
    // When the stream was made tells it from one deleted and made again under the same name.
    const streamCreated = (await jsm.streams.info(stream).catch(() => undefined))?.created;
    // A consumer left by an earlier version with another filter (an event got a new version) is
    // replaced by one that starts just after the last message the old one settled, so nothing
    // is skipped; updating the filter in place is not reliable on every server version.
    let startSeq: number | undefined;
    if (existing && existing.config.filter_subject !== filterSubject) {
      startSeq = existing.ack_floor.stream_seq + 1;
      await jsm.consumers.delete(stream, durable).catch(() => undefined);
      this.options.logger.info({ stream, durable, from: existing.config.filter_subject, to: filterSubject, startSeq }, 'consumer filter changed');
    }
    if (!existing && startSeq === undefined) startSeq = this.resumeAfterLoss(streamCreated);
    if (!existing || startSeq !== undefined) {
      try {
        await jsm.consumers.add(stream, {
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          ...(startSeq === undefined ? { deliver_policy: DeliverPolicy.All } : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: startSeq }),
          filter_subject: filterSubject,
          ack_wait: ackWaitS * 1_000_000_000,
          max_ack_pending: 20_000,
          max_deliver: -1,
        });
      } catch (err) {
        // Another replica created it first.
        await jsm.consumers.info(stream, durable).catch(() => {
          throw err;
        });
      }
    }
    this.ensured = true;
    if (streamCreated !== undefined && streamCreated !== this.resumePoint?.streamCreated) this.resumePoint = { streamCreated, ackFloor: 0 };
    await this.refreshAckFloor();
  }

  /**
   * Where a consumer missing from a stream this replica already read resumes: just after the
   * last acknowledgement floor read from it, if the stream (made at `streamCreated`) is still the
   * one it read; from the stream's first message if it is another one (deleted and made again)
   * or new to it.
   */
  private resumeAfterLoss(streamCreated: string | undefined): number | undefined {
    const known = this.resumePoint;
    if (!known || known.ackFloor === 0 || streamCreated !== known.streamCreated) return undefined;
    const startSeq = known.ackFloor + 1;
    this.options.logger.info({ stream: this.options.stream, durable: this.options.durable, startSeq }, 'consumer missing from its stream; resuming after the last acknowledged message seen');
    return startSeq;
  }

  /** Reads the consumer's acknowledgement floor (only ever raised), for resumeAfterLoss. */
  private async refreshAckFloor(): Promise<void> {
    const known = this.resumePoint;
    if (!known) return;
    const jsm = await this.nc.jetstreamManager();
    const info = await jsm.consumers.info(this.options.stream, this.options.durable).catch(() => undefined);
    if (info && this.resumePoint === known) known.ackFloor = Math.max(known.ackFloor, info.ack_floor.stream_seq);
  }

  private async run(): Promise<void> {
    const { logger } = this.options;
    let failures = 0;
    /** When the current run of failures began, and whether it was warned about. */
    let failingSince = 0;
    let warned = false;
    while (this.running && !this.nc.isClosed()) {
      let messages: ConsumerMessages | undefined;
      try {
        await this.ensureConsumer();
        const consumer = await this.nc.jetstream().consumers.get(this.options.stream, this.options.durable);
        // One long-lived pull per replica, topped up by the client; batches are cut from what arrived.
        const buffer: JsMsg[] = [];
        const inFlight = new Set<Promise<void>>();
        const concurrent = Math.max(1, this.options.concurrentBatches ?? 1);
        let wake: (() => void) | undefined;
        const lingerMs = this.options.lingerMs ?? 0;
        /** When the oldest message now buffered arrived (0: a batch was cut and more were waiting). */
        let oldestAt = 0;
        messages = await consumer.consume({
          max_messages: this.options.batch * (concurrent + 1),
          expires: 5000,
          callback: (m) => {
            if (buffer.length === 0) oldestAt = Date.now();
            buffer.push(m);
            wake?.();
          },
        });
        this.consumed = true;
        failingSince = 0;
        warned = false;
        void this.remakeWhenGone(messages);
        const floorTimer = setInterval(() => void this.refreshAckFloor(), this.options.ackFloorRefreshMs ?? 30_000);
        floorTimer.unref();
        const closed = messages.closed().then(() => undefined);
        let ended = false;
        void closed.then(() => {
          ended = true;
          clearInterval(floorTimer);
          wake?.();
        });
        while (this.running && !ended) {
          const lingering = lingerMs > 0 && buffer.length > 0 && buffer.length < this.options.batch ? oldestAt + lingerMs - Date.now() : 0;
          if (buffer.length === 0 || inFlight.size >= concurrent || lingering > 0) {
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, lingering > 0 ? lingering : 500);
              wake = () => {
                clearTimeout(timer);
                resolve();
              };
            });
            wake = undefined;
            continue;
          }
          const cut = buffer.splice(0, this.options.batch);
          oldestAt = 0;
          const handled: Promise<void> = this.handle(cut).then(() => {
            inFlight.delete(handled);
            failures = 0;
            wake?.();
          });
          inFlight.add(handled);
        }
        await Promise.all(inFlight);
        await messages.close().catch(() => undefined);
        // Taken but not stored: back to the stream at once rather than after the ack wait, and
        // flushed, so the NAKs (and the last ACKs) reach the server before the service disconnects.
        // A message the server sent after the close is dropped by the client: it comes back after
        // the ack wait.
        for (const m of buffer.splice(0)) m.nak();
        await this.nc.flush().catch(() => undefined);
      } catch (err) {
        await messages?.close().catch(() => undefined);
        this.ensured = false;
        failures++;
        failingSince ||= Date.now();
        const details = { err: (err as Error).message, stream: this.options.stream };
        if (!this.consumed && isStreamNotFound(err) && Date.now() - failingSince < (this.options.streamWaitGraceMs ?? 30_000)) {
          if (failures === 1) logger.info(details, 'stream does not exist yet (its owner makes it at start); waiting');
        } else if (!warned || failures % 30 === 0) {
          logger.warn(details, 'consumer not available; retrying');
          warned = true;
        }
        if (this.running) await sleep(Math.min(2000, 200 * failures));
      }
    }
  }

  /** Ends `messages` once its consumer or stream stays gone, so the loop makes them again. */
  private async remakeWhenGone(messages: ConsumerMessages): Promise<void> {
    for await (const status of await messages.status()) {
      const missing = status.type === ConsumerEvents.ConsumerNotFound || status.type === ConsumerEvents.StreamNotFound;
      if (missing && Number(status.data) >= MISSING_LOOKUPS_BEFORE_REMAKE) {
        this.options.logger.warn({ stream: this.options.stream, durable: this.options.durable, missing: status.type }, 'consumer or its stream is gone; making the consumer again');
        this.ensured = false;
        messages.stop();
        return;
      }
    }
  }

  private async handle(batch: JsMsg[]): Promise<void> {
    try {
      const poison = (await this.options.process(batch)) ?? new Set<JsMsg>();
      for (const m of batch) {
        if (poison.has(m)) m.term();
        else m.ack();
      }
    } catch (err) {
      this.options.logger.error({ err, count: batch.length }, 'batch failed; it will be redelivered');
      for (const m of batch) m.nak(2000);
      await sleep(500);
    }
  }
}
