import { randomBytes } from 'node:crypto';
import { ErrorCode, type NatsConnection, type NatsError, type Subscription } from 'nats';
import type { Logger } from '@fleet/service-kit';
import { backstopMarkerRoot, backstopSubscriptions, type TopicRoots } from '../domain/topics';
import type { ControlConnection } from './control';
import { TrafficConnection, type InboundMessage, type MessageSink } from './traffic';

export interface BackstopOptions {
  url: string;
  username: string;
  password: string;
  group: string;
  roots: TopicRoots;
  sessionExpirySeconds: number;
  receiveMaximum: number;
  /** How often a replica that does not hold the backstop checks that some replica does. */
  checkMs: number;
  /** NATS subject the holder answers on (no queue group: a liveness probe between replicas). */
  holderSubject: string;
  instance: string;
  nc: NatsConnection;
  control: ControlConnection;
  /** This replica's share-group connection: its granted subscriptions are what the marker confirms. */
  traffic: TrafficConnection;
  /** Where captured messages go (the same sink as the traffic connection's). */
  sink: MessageSink;
  logger: Logger;
  /** Keep mqtt.js's own packet trace (see clientTrace). */
  trace?: boolean;
}

/**
 * The backstop: one persistent broker session per share group, held by one replica at a time,
 * with plain (not shared) subscriptions to every device topic.
 *
 * Why: Mosquitto keeps sessions, their plain subscriptions and their queued messages across a
 * restart, but not shared subscriptions. After a broker restart the share group is empty until
 * a replica subscribes again, and a device message published in that gap would be acknowledged
 * by the broker and routed to nobody. The backstop's plain subscriptions survive the restart, so
 * the broker queues every device message for it, whether or not any replica is connected.
 *
 * Capture rule: after every (re)connect the backstop captures what it receives, since the
 * share group may have been empty. Once this replica's share-group subscriptions are granted on
 * a connection made after the backstop's own, it publishes a marker with a fresh nonce; the
 * broker routes the marker after everything it routed before, so when the marker comes back,
 * every later message also reaches the share group and the backstop only acknowledges it.
 * Messages captured by both in that window are stored twice (consumers dedupe on natural keys).
 *
 * Holding: one replica holds the backstop and answers on holderSubject; the others check every
 * checkMs and take it when nobody answers. Two that take it at once: the broker keeps the later
 * connection and the earlier one steps back (session taken over).
 */
export class Backstop {
  private connection?: TrafficConnection;
  private holderSub?: Subscription;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  /** Nonce of the current connection's marker; undefined while not connected. */
  private round?: string;
  private capturing = true;
  private confirming = false;
  /** Connections held earlier (their counts stay in `stored`). */
  private readonly retired: TrafficConnection[] = [];

  constructor(private readonly options: BackstopOptions) {}

  get holding(): boolean {
    return this.connection !== undefined;
  }

  /** True while capturing (the share group is not confirmed on the current connection). */
  get isCapturing(): boolean {
    return this.holding && this.capturing;
  }

  /** Device messages the backstop stored (gaps and their overlap with the share group). */
  get stored(): number {
    return this.retired.reduce((n, c) => n + c.stored, this.connection?.stored ?? 0);
  }

  /** Ready: not holding, or holding with the subscriptions granted. */
  get isReady(): boolean {
    return !this.connection || this.connection.isConnected;
  }

  /** Checks at once, then every checkMs, and takes the backstop when no replica holds it. */
  start(): void {
    const loop = async () => {
      if (this.stopped) return;
      if (!this.holding) await this.takeIfFree();
      else if (this.capturing) void this.confirmShareGroup();
      if (!this.stopped) this.timer = setTimeout(() => void loop(), this.options.checkMs);
    };
    void loop();
  }

  /** Called when the traffic connection's subscriptions were granted on a new connection. */
  shareGroupSubscribed(): void {
    if (this.isCapturing) void this.confirmShareGroup(false);
  }

  private async takeIfFree(): Promise<void> {
    const { nc, holderSubject, logger } = this.options;
    try {
      await nc.request(holderSubject, undefined, { timeout: 1000 });
      return;
    } catch (err) {
      const code = (err as NatsError).code;
      if (code !== ErrorCode.NoResponders && code !== ErrorCode.Timeout) {
        logger.warn({ err: (err as Error).message }, 'backstop holder check failed');
        return;
      }
    }
    if (this.stopped || this.holding) return;
    this.hold();
  }

  private hold(): void {
    const o = this.options;
    o.logger.info({ instance: o.instance }, 'holding the backstop session');
    this.holderSub = o.nc.subscribe(o.holderSubject, { callback: (_err, msg) => msg.respond(new TextEncoder().encode(o.instance)) });
    this.connection = new TrafficConnection(
      {
        url: o.url,
        clientId: `${o.group}-backstop`,
        username: o.username,
        password: o.password,
        subscriptions: backstopSubscriptions(o.group, o.roots),
        sessionExpirySeconds: o.sessionExpirySeconds,
        receiveMaximum: o.receiveMaximum,
        leaveOnStop: false,
        trace: o.trace,
        onConnect: () => {
          this.round = randomBytes(8).toString('hex');
          if (!this.capturing) o.logger.info('backstop reconnected: capturing until the share group is confirmed');
          this.capturing = true;
        },
        onSubscribed: () => void this.confirmShareGroup(),
        onTakenOver: () => void this.release(),
        logger: o.logger,
      },
      { take: (message) => this.take(message) },
    );
  }

  private take(message: InboundMessage): void {
    const topic = message.packet.topic;
    const markerRoot = `${backstopMarkerRoot(this.options.group)}/`;
    if (topic.startsWith(markerRoot)) {
      if (this.capturing && topic === `${markerRoot}${this.round}`) {
        this.capturing = false;
        this.options.logger.info('share group confirmed: the backstop stands by');
      }
      message.captureDone('skipped');
    } else if (this.capturing) {
      this.options.sink.take(message);
    } else {
      message.captureDone('skipped');
    }
  }

  /**
   * Publishes the marker of the current round once this replica's share-group subscriptions are
   * granted on a connection newer than the backstop's. resubscribe: grant them again first
   * (needed unless called right after a fresh grant).
   */
  private async confirmShareGroup(resubscribe = true): Promise<void> {
    const round = this.round;
    if (this.confirming || !round || !this.connection?.isConnected) return;
    this.confirming = true;
    try {
      if (resubscribe && !(await this.options.traffic.resubscribe())) return;
      if (round !== this.round || !this.capturing) return;
      await this.options.control.publish(`${backstopMarkerRoot(this.options.group)}/${round}`, Buffer.alloc(0), 1, false);
    } catch (err) {
      this.options.logger.warn({ err: (err as Error).message }, 'backstop marker not published; trying again');
    } finally {
      this.confirming = false;
    }
  }

  private async release(): Promise<void> {
    const connection = this.connection;
    this.connection = undefined;
    if (connection) this.retired.push(connection);
    this.round = undefined;
    this.holderSub?.unsubscribe();
    this.holderSub = undefined;
    await connection?.stop();
  }

  /** Stops checking; a held backstop stores what it took and disconnects, keeping its session. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.release();
  }
}
