import type { NatsConnection } from 'nats';
import { Gauge } from 'prom-client';
import { metricsRegistry } from './metrics';

interface Tracked {
  nc: NatsConnection;
  stream: string;
  durable: string;
}

const tracked = new Map<string, Tracked>();

/**
 * JetStream consumers' backlog, read from the server at each scrape: `pending` (stored, not yet
 * delivered), `ack_pending` (delivered, not acknowledged) and `redelivered`. What the meter's
 * ingest and other consumers are scaled on (consumer lag).
 */
const consumerMessages = new Gauge({
  name: 'fleet_jetstream_consumer_messages',
  help: "A durable JetStream consumer's messages by state: pending (not yet delivered), ack_pending (delivered, not acknowledged), redelivered.",
  labelNames: ['stream', 'consumer', 'state'],
  registers: [metricsRegistry],
  async collect() {
    this.reset();
    await Promise.all(
      [...tracked.values()].map(async ({ nc, stream, durable }) => {
        if (nc.isClosed()) return;
        try {
          const info = await (await nc.jetstreamManager({ checkAPI: false, timeout: 1000 })).consumers.info(stream, durable);
          this.set({ stream, consumer: durable, state: 'pending' }, info.num_pending);
          this.set({ stream, consumer: durable, state: 'ack_pending' }, info.num_ack_pending);
          this.set({ stream, consumer: durable, state: 'redelivered' }, info.num_redelivered);
        } catch {
          // No answer: the series is absent from this scrape rather than stale.
        }
      }),
    );
  },
});

/** Reports a consumer's backlog at every scrape until untrackConsumer. */
export function trackConsumer(nc: NatsConnection, stream: string, durable: string): void {
  tracked.set(`${stream}/${durable}`, { nc, stream, durable });
}

export function untrackConsumer(stream: string, durable: string): void {
  tracked.delete(`${stream}/${durable}`);
  consumerMessages.reset();
}
