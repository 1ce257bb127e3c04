import { connect, type IClientOptions, type MqttClient } from 'mqtt';
import type { DeviceOptions } from './device-types';

/** What the device hears from its connection; only the current client's events reach it. */
export interface ConnectionEvents {
  connected(sessionPresent: boolean): void;
  /** The socket the session was on closed (the client reconnects on its own unless reconnecting is off). */
  closed(): void;
  /** The first attempt failed: the connection is already ended. */
  refused(err: Error): void;
  /** A later error (a failed publish, a dropped socket). */
  error(err: Error): void;
  message(topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): void;
}

/**
 * MQTT 5's Session Expiry Interval that never expires: without one an MQTT 5 session ends at
 * disconnect, which is clean session on, and the protocol wants it off.
 */
export const SESSION_NEVER_EXPIRES = 0xffff_ffff;

/** The MQTT CONNECT a device sends: client id = username = device id, persistent session, `offline` will. */
export function connectOptions(opts: DeviceOptions, password: string | undefined, base: string): IClientOptions {
  const v5 = opts.protocolVersion === 5 || opts.sessionExpirySec !== undefined;
  return {
    clientId: opts.deviceId,
    username: opts.deviceId,
    password,
    clean: false,
    keepalive: opts.keepaliveSec ?? 60,
    protocolVersion: v5 ? 5 : 4,
    reconnectPeriod: opts.reconnectMs ?? 1000,
    connectTimeout: opts.connectTimeoutMs ?? 30_000,
    resubscribe: false,
    will: { topic: `${base}/status`, payload: Buffer.from('offline'), qos: 1, retain: true },
    ...(v5 ? { properties: { sessionExpiryInterval: opts.sessionExpirySec ?? SESSION_NEVER_EXPIRES } } : {}),
  };
}

/**
 * A device's one MQTT connection at a time: opening it (resolving at the first CONNACK), its
 * publishes still waiting for the broker's acknowledgement, and the three ways it ends: killed
 * (no DISCONNECT, so the broker publishes the will), closed cleanly with a goodbye, or
 * abandoned before the first CONNACK. Events of a client that was replaced are ignored.
 */
export class DeviceConnection {
  private client: MqttClient | undefined;
  private readonly inflight = new Set<() => void>();
  private abandonAttempt: (() => void) | undefined;

  constructor(
    private readonly brokerUrl: string,
    private readonly events: ConnectionEvents,
  ) {}

  /** A client exists (connected or reconnecting). */
  get active(): boolean {
    return this.client !== undefined;
  }

  /** QoS 1 and 2 publishes still waiting for the broker's acknowledgement. */
  get unacknowledged(): number {
    return this.inflight.size;
  }

  /** Connects; resolves at the first CONNACK, rejects when the broker refuses, it times out, or the attempt is abandoned. */
  open(options: IClientOptions): Promise<void> {
    const client = connect(this.brokerUrl, options);
    this.client = client;
    let first = true;
    return new Promise<void>((resolve, reject) => {
      this.abandonAttempt = () => {
        if (!first) return;
        first = false;
        reject(new Error(`${String(options.clientId)}: stopped before connecting`));
      };
      client.on('connect', (connack) => {
        if (this.client !== client) return;
        // mqtt.js relays the close of every socket it opened as the client's `close`, a socket
        // it has already replaced included; only the close of the socket this session runs on
        // means the link went down.
        const stream = client.stream;
        stream.once('close', () => {
          if (this.client === client && client.stream === stream) this.events.closed();
        });
        this.events.connected(connack.sessionPresent);
        if (first) {
          first = false;
          resolve();
        }
      });
      client.on('error', (err) => {
        if (this.client !== client) return;
        if (first) {
          first = false;
          this.kill();
          this.events.refused(err);
          reject(new Error(`${String(options.clientId)}: ${err.message}`));
          return;
        }
        this.events.error(err);
      });
      client.on('message', (topic, payload, packet) => {
        if (this.client === client) this.events.message(topic, payload, packet.qos, packet.retain);
      });
    });
  }

  subscribe(topics: Record<string, { qos: 0 | 1 | 2 }>): void {
    this.client?.subscribe(topics);
  }

  /**
   * Publishes; resolves true once the broker acknowledged it (QoS 0: once written), false when
   * it never will be: no client, the client failed it (mqtt.js fails publishes queued while a
   * reconnect's resend was cut short), or the connection was ended.
   */
  publish(topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): Promise<boolean> {
    const client = this.client;
    if (!client) return Promise.resolve(false);
    return new Promise((resolve) => {
      let settled = false;
      const finish = (acknowledged: boolean) => {
        if (settled) return;
        settled = true;
        this.inflight.delete(abandon);
        resolve(acknowledged);
      };
      const abandon = () => finish(false);
      if (qos > 0) this.inflight.add(abandon);
      client.publish(topic, payload, { qos, retain }, (err) => {
        if (err) this.events.error(err);
        finish(!err);
      });
    });
  }

  /** Ends a connection attempt still waiting for its first CONNACK (its promise rejects). */
  abandon(): void {
    this.abandonAttempt?.();
    this.abandonAttempt = undefined;
  }

  /** Kills the socket without DISCONNECT (the broker publishes the will). */
  kill(): void {
    const client = this.client;
    this.client = undefined;
    client?.end(true);
    this.settleInflight();
  }

  /**
   * A clean goodbye: the `goodbye` message (if connected), then DISCONNECT, so the broker drops
   * the will. Never an endless one: a broker that stops answering (or an in-flight message it
   * never acknowledges) ends in a forced close after `graceMs`.
   */
  async close(goodbye: { topic: string; payload: string } | undefined, graceMs: number): Promise<void> {
    const client = this.client;
    if (!client) return;
    this.client = undefined;
    const clean = (async () => {
      if (goodbye && client.connected) {
        await new Promise<void>((resolve) => client.publish(goodbye.topic, goodbye.payload, { qos: 1, retain: true }, () => resolve()));
      }
      await new Promise<void>((resolve) => client.end(false, {}, () => resolve()));
      return true;
    })();
    let timer: NodeJS.Timeout | undefined;
    const done = await Promise.race([clean, new Promise<false>((r) => (timer = setTimeout(() => r(false), graceMs)))]);
    clearTimeout(timer);
    if (!done) client.end(true);
    this.settleInflight();
  }

  /** Whether the current client is connected now. */
  get connected(): boolean {
    return this.client?.connected ?? false;
  }

  /** Publishes of an ended client never get their acknowledgement; nobody should wait for them. */
  private settleInflight(): void {
    for (const done of [...this.inflight]) done();
  }
}
