import { AckPolicy, DeliverPolicy, type JsMsg, type NatsConnection } from 'nats';
import type { Logger } from './logger';

export interface PullConsumerOptions {
  stream: string;
  durable: string;
  filterSubject: string;
  /** Most messages taken per fetch. */
  batch: number;
  /** Handles one fetched batch; resolves once its effects are committed (then every message is acked). */
  process: (messages: JsMsg[]) => Promise<void>;
  logger: Logger;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A durable JetStream pull consumer shared by every replica: fetches a batch, hands it to
 * `process`, and acks only after that succeeded (a failed batch is redelivered). Waits for the
 * stream when it does not exist yet (the bridge creates it).
 */
export class DurablePullConsumer {
  private running = false;
  private loop?: Promise<void>;
  private ensured = false;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: PullConsumerOptions,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  private async ensureConsumer(): Promise<void> {
    if (this.ensured) return;
    const { stream, durable, filterSubject } = this.options;
    const jsm = await this.nc.jetstreamManager();
    try {
      await jsm.consumers.info(stream, durable);
    } catch {
      await jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        filter_subject: filterSubject,
        ack_wait: 30_000_000_000,
        max_ack_pending: 10_000,
      });
    }
    this.ensured = true;
  }

  private async run(): Promise<void> {
    const { logger } = this.options;
    let failures = 0;
    while (this.running && !this.nc.isClosed()) {
      try {
        await this.ensureConsumer();
        const consumer = await this.nc.jetstream().consumers.get(this.options.stream, this.options.durable);
        const fetched = await consumer.fetch({ max_messages: this.options.batch, expires: 1000 });
        const messages: JsMsg[] = [];
        for await (const m of fetched) messages.push(m);
        if (messages.length > 0) {
          try {
            await this.options.process(messages);
            for (const m of messages) m.ack();
          } catch (err) {
            logger.error({ err, count: messages.length }, 'batch failed; it will be redelivered');
            for (const m of messages) m.nak(2000);
          }
        }
        failures = 0;
      } catch (err) {
        this.ensured = false;
        failures++;
        if (failures === 1 || failures % 30 === 0) logger.warn({ err: (err as Error).message, stream: this.options.stream }, 'consumer not available yet; retrying');
        if (this.running) await sleep(Math.min(2000, 200 * failures));
      }
    }
  }
}
