import { randomUUID } from 'node:crypto';
import mqtt, { type MqttClient } from 'mqtt';
import type { Logger } from '@fleet/service-kit';
import type { DynsecCommand, DynsecResponse } from '../domain/dynsec';
import { clientTrace, endClient } from './lifecycle';

const CONTROL_TOPIC = '$CONTROL/dynamic-security/v1';
const RESPONSE_TOPIC = '$CONTROL/dynamic-security/v1/response';

/**
 * MQTT 5 user property on every message the platform sends. The bridge's own shared
 * subscriptions cover device subtrees, so these messages come back to it: the capture skips
 * them (they are captured as dev.out when sent) and they never count as device presence.
 */
export const ORIGIN_PROPERTY = 'fleet-origin';
export const PLATFORM_ORIGIN = 'platform';

export class BrokerError extends Error {}

export interface ControlOptions {
  url: string;
  clientId: string;
  username: string;
  password: string;
  dynsecTimeoutMs: number;
  publishTimeoutMs: number;
  logger: Logger;
  /** Keep mqtt.js's own packet trace (see clientTrace). */
  trace?: boolean;
}

interface Pending {
  resolve: (response: DynsecResponse) => void;
  reject: (err: Error) => void;
}

/**
 * The bridge's control connection (clean session, admin credentials): requests to the
 * dynamic-security plugin ($CONTROL/dynamic-security/v1, answers on .../response correlated
 * by correlationData) and messages published to devices. Nothing is queued while the broker
 * is away, nor kept across a lost connection: a call fails, so callers answer 503 instead of
 * sending late.
 */
export class ControlConnection {
  private readonly client: MqttClient;
  private readonly pending = new Map<string, Pending>();
  private subscribed = false;

  constructor(private readonly options: ControlOptions) {
    this.client = mqtt.connect(options.url, {
      clientId: options.clientId,
      username: options.username,
      password: options.password,
      protocolVersion: 5,
      clean: true,
      keepalive: 30,
      reconnectPeriod: 1000,
      connectTimeout: 5000,
      queueQoSZero: false,
      // The response subscription is made explicitly on every connect (below); mqtt.js's own
      // resubscribe would take the topic first and answer that subscribe with nothing granted.
      resubscribe: false,
      ...clientTrace(options.trace),
    });
    this.client.on('connect', () => {
      this.subscribed = false;
      this.client.subscribe(RESPONSE_TOPIC, { qos: 1 }, (err, granted) => {
        const ok = !err && (granted?.[0]?.qos ?? 128) < 128;
        if (!ok) options.logger.error({ err }, 'could not subscribe to dynamic-security responses');
        this.subscribed = ok;
      });
      options.logger.info('control connection up');
    });
    this.client.on('close', () => {
      this.subscribed = false;
      this.dropUnacknowledged();
      // Answers to outstanding commands would come on the closed connection only.
      for (const [id, p] of this.pending) {
        this.pending.delete(id);
        p.reject(new BrokerError('broker connection lost'));
      }
    });
    this.client.on('error', (err) => options.logger.warn({ err: err.message }, 'control connection error'));
    this.client.on('message', (topic, payload) => {
      if (topic === RESPONSE_TOPIC) this.onResponse(payload);
    });
  }

  /**
   * mqtt.js keeps QoS 1/2 messages the broker has not acknowledged and sends them again on
   * the next connection, even with a clean session. Their callers were already answered 503
   * (or will be now), so a later send would deliver a command the partner was told failed;
   * and a message the broker refuses by closing the connection would be sent again on every
   * reconnect, holding the connection down for good. They are dropped, failing their callers.
   */
  private dropUnacknowledged(): void {
    for (const messageId of Object.keys(this.client.outgoing)) this.client.removeOutgoingMessage(Number(messageId));
  }

  get isConnected(): boolean {
    return this.client.connected && this.subscribed;
  }

  /** Resolves when connected and subscribed to the plugin's answers (or rejects after timeoutMs). */
  async ready(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.isConnected) {
      if (Date.now() > deadline) throw new BrokerError(`no broker connection at ${this.options.url}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private onResponse(payload: Buffer): void {
    let responses: unknown;
    try {
      responses = (JSON.parse(payload.toString('utf8')) as { responses?: unknown }).responses;
    } catch {
      this.options.logger.warn('unreadable dynamic-security response');
      return;
    }
    if (!Array.isArray(responses)) return;
    for (const r of responses as DynsecResponse[]) {
      const p = r.correlationData ? this.pending.get(r.correlationData) : undefined;
      if (!p) continue;
      this.pending.delete(r.correlationData as string);
      p.resolve(r);
    }
  }

  /**
   * Sends commands in one control message (the plugin runs them in order) and resolves with
   * their responses in the same order; a command's own error is in its response's `error`.
   * Rejects with BrokerError when the broker is away or does not answer in time.
   */
  async dynsec(commands: DynsecCommand[]): Promise<DynsecResponse[]> {
    if (!this.isConnected) throw new BrokerError('broker not connected');
    const ids = commands.map(() => randomUUID());
    const answers = ids.map(
      (id) =>
        new Promise<DynsecResponse>((resolve, reject) => {
          this.pending.set(id, { resolve, reject });
        }),
    );
    const timer = setTimeout(() => {
      for (const id of ids) {
        const p = this.pending.get(id);
        this.pending.delete(id);
        p?.reject(new BrokerError('no answer from the dynamic-security plugin'));
      }
    }, this.options.dynsecTimeoutMs);
    try {
      const message = JSON.stringify({ commands: commands.map((c, i) => ({ ...c, correlationData: ids[i] })) });
      this.client.publish(CONTROL_TOPIC, message, { qos: 1 }, (err) => {
        if (!err) return;
        for (const id of ids) {
          const p = this.pending.get(id);
          this.pending.delete(id);
          p?.reject(new BrokerError(`control message refused: ${err.message}`));
        }
      });
      return await Promise.all(answers);
    } finally {
      clearTimeout(timer);
      for (const id of ids) this.pending.delete(id);
    }
  }

  /**
   * Publishes one message and resolves when the broker took it: PUBACK (QoS 1), PUBCOMP
   * (QoS 2), written to the socket (QoS 0). Rejects with BrokerError on refusal, when the
   * broker is away, or after the publish timeout.
   */
  async publish(topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): Promise<void> {
    if (!this.client.connected) throw new BrokerError('broker not connected');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new BrokerError('the broker did not take the message in time')), this.options.publishTimeoutMs);
    });
    const sent = new Promise<void>((resolve, reject) => {
      this.client.publish(topic, payload, { qos, retain, properties: { userProperties: { [ORIGIN_PROPERTY]: PLATFORM_ORIGIN } } }, (err) =>
        err ? reject(new BrokerError(err.message)) : resolve(),
      );
    });
    try {
      await Promise.race([sent, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await endClient(this.client);
  }
}
