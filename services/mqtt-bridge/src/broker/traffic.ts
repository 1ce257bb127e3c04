import { randomBytes } from 'node:crypto';
import mqtt, { type IPublishPacket, type MqttClient } from 'mqtt';
import type { Logger } from '@fleet/service-kit';
import type { CaptureOutcome, CaptureOwner } from '../capture/device-in';
import { pubackPackets } from '../domain/wire';
import { clientTrace, endClient, withTimeout } from './lifecycle';

export interface TrafficOptions {
  url: string;
  clientId: string;
  username: string;
  password: string;
  /** Subscriptions to hold (QoS 1, retain as published, no retained replay). */
  subscriptions: string[];
  sessionExpirySeconds: number;
  receiveMaximum: number;
  /**
   * Whether stop() unsubscribes first (default true: a replica leaving a share group lets the
   * broker route the rest to the others). The backstop keeps its subscriptions so its session
   * goes on queueing while it is away.
   */
  leaveOnStop?: boolean;
  /** Called on every (re)connect, before the subscriptions are made again. */
  onConnect?: () => void;
  /** Called when the broker granted the subscriptions on the current connection. */
  onSubscribed?: () => void;
  /** Called when another client took this client id over (MQTT 5 reason 0x8E): the connection is ended. */
  onTakenOver?: () => void;
  logger: Logger;
  /** Keep mqtt.js's own packet trace (see clientTrace). */
  trace?: boolean;
}

/** MQTT 5 DISCONNECT reason code: another connection took the client id over. */
const SESSION_TAKEN_OVER = 0x8e;

/**
 * Takes one device message. The sink must call message.captureDone() exactly once, at once or
 * later (a QoS 1 message is acknowledged to the broker only after an outcome other than
 * 'abandoned'); message is also the CaptureOwner to hand to the DeviceInWriter.
 */
export interface MessageSink {
  take(message: InboundMessage): void;
}

/** Passed to mqtt.js's handleMessage callback to skip its immediate PUBACK (see onPacket). */
const DEFERRED = new Error('acknowledged later');

/** One message taken off the traffic connection, from arrival to its outcome. */
export class InboundMessage implements CaptureOwner {
  /** Outcome known; for QoS 1, ready to be acknowledged unless it was abandoned. */
  settled = false;
  ackable = false;

  constructor(
    private readonly traffic: TrafficConnection,
    readonly packet: IPublishPacket,
    /** Epoch ms when it came off the network. */
    readonly receivedAt: number,
    /** The connection it came on: it is acknowledged on that one only. */
    readonly connection: number,
    private readonly msgIdPrefix: string,
    private readonly counter: number,
  ) {}

  /** Nats-Msg-Id for its capture: the same for every retry of this capture, unique otherwise. */
  get msgId(): string {
    return `${this.msgIdPrefix}${this.counter}`;
  }

  captureDone(outcome: CaptureOutcome): void {
    this.traffic.settle(this, outcome);
  }

  retryWanted(): boolean {
    return this.traffic.wants(this);
  }
}

/**
 * The bridge's device-traffic connection: a persistent session (clean start off, a stable
 * client id) holding shared subscriptions, so replicas split the traffic and messages that
 * arrive while a replica is away wait for it.
 *
 * Acknowledgement: mqtt.js sends a QoS 1 PUBACK as soon as its handleMessage callback
 * completes, and handles the connection's packets one at a time until then. Awaiting the
 * store inside handleMessage would leave one message in flight per replica. Instead each
 * message is handed to the sink, handleMessage completes with an error (mqtt.js then skips
 * its PUBACK and moves to the next packet), and the PUBACKs are written here once the
 * messages are stored, in the order they arrived. A message whose connection dropped before
 * it was stored is never acknowledged on a later connection: the broker sends it again on
 * the resumed session.
 *
 * Bound: the bridge takes at most Receive Maximum messages that are not yet acknowledged
 * (and at most that many not yet settled). Past that it holds mqtt.js's callback, so mqtt.js
 * stops reading the socket and TCP pushes back on the broker, until captures complete. The
 * broker cannot be relied on for this: Mosquitto 2.0.11 sent one bridge up to about 30,000
 * unacknowledged messages with Receive Maximum 1000 when the bridge did not push back.
 */
export class TrafficConnection {
  private readonly client: MqttClient;
  private connection = 0;
  /** Unacknowledged QoS 1 messages of the current connection, in arrival order. */
  private acks: InboundMessage[] = [];
  private accepting = true;
  private subscribed = false;
  private unsettled = 0;
  private idleWaiters: (() => void)[] = [];
  private held?: (err?: Error) => void;
  private heldArg?: Error;
  private flushQueued = false;
  private readonly flushAcks = () => this.writeAcks();
  private readonly limit: number;
  /** Unique per process, so message ids never repeat across restarts under the same client id. */
  private readonly boot = randomBytes(4).toString('hex');
  private msgIdPrefix = '';
  private counter = 0;
  private storedCount = 0;

  constructor(
    private readonly options: TrafficOptions,
    private readonly sink: MessageSink,
  ) {
    this.limit = options.receiveMaximum;
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
      ...clientTrace(options.trace),
    });
    this.client.handleMessage = (packet, callback) => this.onPacket(packet, callback);
    this.client.on('connect', (connack) => {
      this.nextConnection();
      options.logger.info({ client_id: options.clientId, session_present: connack.sessionPresent }, 'device traffic connection up');
      options.onConnect?.();
      if (this.accepting) void this.subscribe();
    });
    this.client.on('disconnect', (packet) => {
      if (packet.reasonCode !== SESSION_TAKEN_OVER) return;
      options.logger.warn({ client_id: options.clientId }, 'another connection took this client id over; not reconnecting');
      this.accepting = false;
      void this.client.endAsync(true).then(() => options.onTakenOver?.());
    });
    this.client.on('close', () => {
      this.nextConnection();
      this.subscribed = false;
      this.acks = [];
      this.release(true);
    });
    this.client.on('error', (err) => options.logger.warn({ err: err.message }, 'device traffic connection error'));
  }

  /** Device messages stored in DEVICE_IN since start. */
  get stored(): number {
    return this.storedCount;
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

  /**
   * Makes the subscriptions again on the current connection (a no-op for the broker when they
   * exist). True once granted.
   */
  async resubscribe(): Promise<boolean> {
    if (!this.client.connected || !this.accepting) return false;
    return this.subscribe();
  }

  private async subscribe(): Promise<boolean> {
    const connection = this.connection;
    try {
      const granted = await this.client.subscribeAsync(
        // rap: the Mqtt-Retain header tells what the device set; rh 2: Mosquitto would otherwise
        // replay every retained device message to the group on each (re)subscribe.
        Object.fromEntries(this.options.subscriptions.map((topic) => [topic, { qos: 1 as const, rap: true, rh: 2 }])),
      );
      const refused = granted.filter((g) => g.qos >= 128);
      if (refused.length > 0) {
        this.options.logger.error({ refused: refused.map((g) => g.topic) }, 'broker refused the subscriptions');
        return false;
      }
      if (connection !== this.connection) return false;
      this.subscribed = true;
      this.options.onSubscribed?.();
      return true;
    } catch (err) {
      this.options.logger.warn({ err: (err as Error).message }, 'subscribe failed');
      return false;
    }
  }

  private nextConnection(): void {
    this.connection += 1;
    this.msgIdPrefix = `${this.options.clientId}-${this.boot}.${this.connection}-`;
  }

  private onPacket(packet: IPublishPacket, callback: (err?: Error) => void): void {
    const receivedAt = Date.now();
    // QoS 0 needs no acknowledgement (QoS 2 does not arrive: subscriptions are QoS 1).
    const done = packet.qos === 1 ? DEFERRED : undefined;
    if (!this.accepting) {
      // Shutting down: leave QoS 1 messages unacknowledged; the broker sends them again.
      callback(done);
      return;
    }
    const message = new InboundMessage(this, packet, receivedAt, this.connection, this.msgIdPrefix, ++this.counter);
    this.unsettled += 1;
    if (packet.qos === 1) this.acks.push(message);
    this.sink.take(message);
    if (this.full()) {
      this.held = callback;
      this.heldArg = done;
    } else {
      callback(done);
    }
  }

  private full(): boolean {
    return this.acks.length >= this.limit || this.unsettled >= this.limit;
  }

  /** Lets mqtt.js go on reading once there is room again (or at once when `force`). */
  private release(force = false): void {
    const callback = this.held;
    if (!callback || (!force && this.full())) return;
    this.held = undefined;
    callback(this.heldArg);
  }

  /** @internal InboundMessage.captureDone */
  settle(message: InboundMessage, outcome: CaptureOutcome): void {
    if (message.settled) return;
    message.settled = true;
    this.unsettled -= 1;
    if (outcome === 'stored') this.storedCount += 1;
    if (outcome === 'abandoned') {
      this.options.logger.debug({ topic: message.packet.topic }, 'device message not stored; the broker will send it again');
    } else if (message.packet.qos === 1) {
      message.ackable = true;
      // PUBACKs that become ready together (one read of PubAcks from NATS) go out in one write.
      if (!this.flushQueued && message.connection === this.connection) {
        this.flushQueued = true;
        setImmediate(this.flushAcks);
      }
    }
    if (this.held) this.release();
    if (this.unsettled === 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  /** @internal InboundMessage.retryWanted: only while running and on the connection it came on. */
  wants(message: InboundMessage): boolean {
    return this.accepting && message.connection === this.connection;
  }

  /**
   * Acknowledges the stored messages at the head of the queue, in arrival order, in one socket
   * write; a message not stored yet holds back those after it.
   */
  private writeAcks(): void {
    this.flushQueued = false;
    let n = 0;
    while (n < this.acks.length && (this.acks[n] as InboundMessage).ackable) n += 1;
    if (n === 0) return;
    const ready = this.acks.splice(0, n);
    if (this.client.connected) {
      const ids: number[] = [];
      for (const m of ready) if (m.connection === this.connection) ids.push(m.packet.messageId as number);
      // mqtt.js has no public call for a PUBACK and writes each packet on its own; the bytes
      // are the plain MQTT PUBACK (see pubackPackets).
      if (ids.length > 0) this.client.stream.write(pubackPackets(ids));
    }
    if (this.held) this.release();
  }

  /**
   * Stops taking messages: leaves the share group unless leaveOnStop is false (so the broker
   * routes the rest to other replicas), waits until messages already taken are stored and
   * acknowledged, then disconnects. The session stays for MQTT_SESSION_EXPIRY_S.
   */
  async stop(): Promise<void> {
    this.accepting = false;
    // From here on nothing new is taken, so mqtt.js may read on (the UNSUBACK must get through).
    this.release(true);
    if (this.client.connected && this.options.leaveOnStop !== false) {
      try {
        await withTimeout(this.client.unsubscribeAsync(this.options.subscriptions), 3000);
      } catch (err) {
        this.options.logger.warn({ err: (err as Error).message }, 'unsubscribe failed');
      }
    }
    if (this.unsettled > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    this.writeAcks();
    await endClient(this.client);
  }
}
