import mqtt, { type IPublishPacket, type MqttClient } from 'mqtt';
import type { Logger } from '@fleet/service-kit';
import { endClient, withTimeout } from './lifecycle';

export interface TrafficOptions {
  url: string;
  clientId: string;
  username: string;
  password: string;
  /** Shared subscriptions to hold (QoS 1, retain as published, no retained replay). */
  subscriptions: string[];
  sessionExpirySeconds: number;
  receiveMaximum: number;
  logger: Logger;
}

/** Receives one device message; resolves once it is safely stored (only then is a QoS 1 message acknowledged). */
export type MessageSink = (packet: IPublishPacket, receivedAt: number) => Promise<void>;

interface PendingAck {
  messageId: number;
  connection: number;
  done: boolean;
}

/** Passed to mqtt.js's handleMessage callback to skip its immediate PUBACK (see onPacket). */
const DEFERRED = new Error('acknowledged later');

/**
 * The bridge's device-traffic connection: a persistent session (clean start off, a stable
 * client id) holding shared subscriptions, so replicas split the traffic and messages that
 * arrive while a replica is away wait for it.
 *
 * Acknowledgement: mqtt.js sends a QoS 1 PUBACK as soon as its handleMessage callback
 * completes, and handles the connection's packets one at a time until then. Awaiting the
 * store inside handleMessage would leave one message in flight per replica. Instead each
 * QoS 1 message is handed to the sink, handleMessage completes with an error (mqtt.js then
 * skips its PUBACK and moves to the next packet), and the PUBACK is sent here once the sink
 * resolved, in the order the messages arrived. The broker keeps up to Receive Maximum
 * messages in flight. A message whose connection dropped before it was stored is never
 * acknowledged on a later connection: the broker sends it again on the resumed session.
 */
export class TrafficConnection {
  private readonly client: MqttClient;
  private connection = 0;
  private readonly acks: PendingAck[] = [];
  private accepting = true;
  private subscribed = false;
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly options: TrafficOptions,
    private readonly sink: MessageSink,
  ) {
    this.client = mqtt.connect(options.url, {
      clientId: options.clientId,
      username: options.username,
      password: options.password,
      protocolVersion: 5,
      clean: false,
      keepalive: 30,
      reconnectPeriod: 1000,
      connectTimeout: 5000,
      // Subscriptions live in the broker session; they are re-made explicitly on every connect.
      resubscribe: false,
      properties: { sessionExpiryInterval: options.sessionExpirySeconds, receiveMaximum: options.receiveMaximum },
    });
    this.client.handleMessage = (packet, callback) => this.onPacket(packet, callback);
    this.client.on('connect', (connack) => {
      this.connection += 1;
      options.logger.info({ session_present: connack.sessionPresent }, 'device traffic connection up');
      if (this.accepting) void this.subscribe();
    });
    this.client.on('close', () => {
      this.connection += 1;
      this.subscribed = false;
      this.acks.length = 0;
    });
    this.client.on('error', (err) => options.logger.warn({ err: err.message }, 'device traffic connection error'));
  }

  get isConnected(): boolean {
    return this.client.connected && this.subscribed;
  }

  async ready(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.isConnected) {
      if (Date.now() > deadline) throw new Error(`no broker connection at ${this.options.url}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private async subscribe(): Promise<void> {
    try {
      const granted = await this.client.subscribeAsync(
        // rap: the Mqtt-Retain header tells what the device set; rh 2: Mosquitto would otherwise
        // replay every retained device message to the group on each (re)subscribe.
        Object.fromEntries(this.options.subscriptions.map((topic) => [topic, { qos: 1 as const, rap: true, rh: 2 }])),
      );
      const refused = granted.filter((g) => g.qos >= 128);
      if (refused.length > 0) {
        this.options.logger.error({ refused: refused.map((g) => g.topic) }, 'broker refused the shared subscriptions');
        return;
      }
      this.subscribed = true;
    } catch (err) {
      this.options.logger.warn({ err: (err as Error).message }, 'subscribe failed');
    }
  }

  private onPacket(packet: IPublishPacket, callback: (err?: Error) => void): void {
    const receivedAt = Date.now();
    if (!this.accepting) {
      // Shutting down: leave QoS 1 messages unacknowledged; the broker sends them again.
      callback(packet.qos === 1 ? DEFERRED : undefined);
      return;
    }
    const connection = this.connection;
    if (packet.qos !== 1) {
      // QoS 0 needs no acknowledgement (QoS 2 does not arrive: subscriptions are QoS 1).
      this.track(this.store(packet, receivedAt, connection));
      callback();
      return;
    }
    const ack: PendingAck = { messageId: packet.messageId as number, connection, done: false };
    this.acks.push(ack);
    this.track(
      this.store(packet, receivedAt, connection).then((stored) => {
        ack.done = stored;
        this.sendAcks();
      }),
    );
    callback(DEFERRED);
  }

  /**
   * Hands the message to the sink, trying again while the sink fails (NATS away) as long as
   * the bridge is running and the connection is the one the message came on; false when it
   * gave up (the broker will send a QoS 1 message again on the resumed session).
   */
  private async store(packet: IPublishPacket, receivedAt: number, connection: number): Promise<boolean> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        await this.sink(packet, receivedAt);
        return true;
      } catch (err) {
        if (attempt === 0 || attempt % 20 === 0) this.options.logger.warn({ err: (err as Error).message, topic: packet.topic }, 'device message not stored yet; retrying');
        if (!this.accepting || connection !== this.connection) return false;
        await new Promise((r) => setTimeout(r, Math.min(100 * 2 ** attempt, 2000)));
        if (!this.accepting || connection !== this.connection) return false;
      }
    }
  }

  private track(work: Promise<unknown>): void {
    this.inFlight += 1;
    void work
      .catch((err) => this.options.logger.error({ err }, 'device message handling failed'))
      .finally(() => {
        this.inFlight -= 1;
        if (this.inFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
      });
  }

  /** Acknowledges stored messages in arrival order, on the connection they came on. */
  private sendAcks(): void {
    while (this.acks.length > 0 && (this.acks[0]?.done || this.acks[0]?.connection !== this.connection)) {
      const ack = this.acks.shift() as PendingAck;
      if (!ack.done || ack.connection !== this.connection || !this.client.connected) continue;
      // mqtt.js has no public call for a PUBACK; this is the one its own handler uses.
      (this.client as unknown as { _sendPacket(p: object): void })._sendPacket({ cmd: 'puback', messageId: ack.messageId, reasonCode: 0 });
    }
  }

  /**
   * Stops taking messages: leaves the share group (so the broker routes the rest to other
   * replicas), waits until messages already taken are stored and acknowledged, then
   * disconnects. The session stays for MQTT_SESSION_EXPIRY_S.
   */
  async stop(): Promise<void> {
    this.accepting = false;
    if (this.client.connected) {
      try {
        await withTimeout(this.client.unsubscribeAsync(this.options.subscriptions), 3000);
      } catch (err) {
        this.options.logger.warn({ err: (err as Error).message }, 'unsubscribe failed');
      }
    }
    if (this.inFlight > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    await endClient(this.client);
  }
}
