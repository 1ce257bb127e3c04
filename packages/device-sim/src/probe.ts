import { randomBytes } from 'node:crypto';
import { connectAsync, type IClientOptions, type MqttClient } from 'mqtt';

const MAX_IN_FLIGHT = 10;

export interface ProbeMessage {
  topic: string;
  payload: Buffer;
  /** payload as UTF-8 */
  text: string;
  retain: boolean;
  qos: 0 | 1 | 2;
  at: number;
}

/**
 * The platform's side of the broker in a test: subscribes to topic filters, records what
 * arrives, publishes to devices, and waits for matching messages.
 */
export class MqttProbe {
  readonly messages: ProbeMessage[] = [];
  private waiters = new Set<{ match: (m: ProbeMessage) => boolean; resolve: (m: ProbeMessage) => void }>();

  private constructor(readonly client: MqttClient) {
    client.on('message', (topic, payload, packet) => {
      const m: ProbeMessage = { topic, payload, text: payload.toString('utf8'), retain: packet.retain, qos: packet.qos, at: Date.now() };
      this.messages.push(m);
      for (const w of this.waiters) {
        if (w.match(m)) {
          this.waiters.delete(w);
          w.resolve(m);
        }
      }
    });
  }

  static async open(brokerUrl: string, filters: string[] = [], options: IClientOptions = {}): Promise<MqttProbe> {
    const client = await connectAsync(brokerUrl, { clientId: `probe-${randomBytes(6).toString('hex')}`, clean: true, reconnectPeriod: 0, ...options });
    const probe = new MqttProbe(client);
    if (filters.length > 0) await probe.subscribe(filters);
    return probe;
  }

  async subscribe(filters: string[], qos: 0 | 1 | 2 = 2): Promise<void> {
    await this.client.subscribeAsync(filters, { qos });
  }

  /**
   * Publishes; at most 10 QoS 1/2 publishes are in flight at once, because the broker
   * (Mosquitto's max_inflight_messages, 20 by default) drops what a client sends beyond its limit.
   */
  async publish(topic: string, payload: string | Buffer, options: { qos?: 0 | 1 | 2; retain?: boolean } = {}): Promise<void> {
    const qos = options.qos ?? 1;
    if (qos === 0) {
      await this.client.publishAsync(topic, payload, { qos, retain: options.retain ?? false });
      return;
    }
    while (this.inFlight >= MAX_IN_FLIGHT) await new Promise<void>((r) => this.slotWaiters.push(r));
    this.inFlight++;
    try {
      await this.client.publishAsync(topic, payload, { qos, retain: options.retain ?? false });
    } finally {
      this.inFlight--;
      this.slotWaiters.shift()?.();
    }
  }
  private inFlight = 0;
  private slotWaiters: Array<() => void> = [];

  /** Messages on one topic so far. */
  on(topic: string): ProbeMessage[] {
    return this.messages.filter((m) => m.topic === topic);
  }

  /** First message so far, or the next to arrive, that matches. */
  waitFor(match: (m: ProbeMessage) => boolean, timeoutMs = 5000, what = 'message'): Promise<ProbeMessage> {
    const found = this.messages.find(match);
    if (found) return Promise.resolve(found);
    return this.next(match, timeoutMs, what);
  }

  /** Next message from now on that matches. */
  next(match: (m: ProbeMessage) => boolean, timeoutMs = 5000, what = 'message'): Promise<ProbeMessage> {
    return new Promise((resolve, reject) => {
      const waiter = {
        match,
        resolve: (m: ProbeMessage) => {
          clearTimeout(timer);
          resolve(m);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`probe: no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  /** Waits until `count` messages match (counting those already here). */
  async waitForCount(match: (m: ProbeMessage) => boolean, count: number, timeoutMs = 5000): Promise<ProbeMessage[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.messages.filter(match);
      if (found.length >= count) return found;
      if (Date.now() > deadline) throw new Error(`probe: ${found.length} of ${count} messages within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async close(): Promise<void> {
    await this.client.endAsync();
  }
}

/**
 * Clears every retained message under a topic filter (e.g. `sim-test-1/#` after a test run):
 * collects the retained topics for `settleMs`, then publishes an empty retained payload on each.
 */
export async function clearRetained(brokerUrl: string, filter: string, settleMs = 300): Promise<number> {
  const probe = await MqttProbe.open(brokerUrl);
  try {
    await probe.subscribe([filter], 0);
    await new Promise((r) => setTimeout(r, settleMs));
    const topics = [...new Set(probe.messages.filter((m) => m.retain && m.payload.length > 0).map((m) => m.topic))];
    await Promise.all(topics.map((t) => probe.publish(t, '', { qos: 1, retain: true })));
    return topics.length;
  } finally {
    await probe.close();
  }
}
