/**
 * The one client of mqtt-bridge's bus contract (proto-schemas/bridge/, subjects bridge.*), owned
 * beside the bridge so every caller has the same policies:
 *
 * - **Errors**: any failure of a call (bridge down, slow, past the deadline, the broker refusing,
 *   a body the bridge refuses) is a 503 whose code says what did not happen:
 *   `broker_unavailable` for credentials (nothing was changed), `publish_failed` for messages
 *   (the device got nothing). The caller built the request from validated input, so a refusal
 *   is the platform's failure, never the partner's; its reason is logged.
 * - **QoS**: what the device protocol says for the topic: `sys/exe` 2, `cmd/<channel>` 1;
 *   other topics the caller's, default 1. A raw MQTT publish (`qosAsGiven`) is sent with the
 *   caller's QoS on every topic, since it goes out as the partner wrote it. Never retained
 *   unless asked.
 * - **Time**: a call gets no more than the request it serves has left (`deadline`), so nothing
 *   reaches the broker after the partner was told 503.
 * - **Contract**: the bus checks bodies and replies against their schema (proto-schemas/bridge/).
 */
import { ContractViolation, type BridgeCredentialUpsertBody, type BridgeMessagePublishBody, type BridgeMessagePublishReply, type SubjectsOf } from '@fleet/contracts';
import { ServiceUnavailableError, type BodyOf, type Bus, type CallFor, type ReplyBodyOf, type RequestOf, type ServiceClientOptions } from '@fleet/service-kit';
import { PublishBatcher } from './publish-batcher';

type BridgeSubject = SubjectsOf<'mqtt-bridge'>;

export type { CallFor } from '@fleet/service-kit';

/** What reached the broker, and when it took it. */
export type Published = BridgeMessagePublishReply;

export interface OutgoingMessage {
  topic: string;
  payload: string;
  /** For topics the device protocol gives no QoS, or with `qosAsGiven`; default 1. */
  qos?: 0 | 1 | 2;
  retain?: boolean;
  /**
   * Raw MQTT: `qos` is used as given even on `sys/exe` and `cmd/<channel>`, whose protocol QoS
   * otherwise wins (the partner's message is sent as written). Without `qos` the protocol's
   * QoS still applies.
   */
  qosAsGiven?: boolean;
}

/** Device broker credentials (what device-registry needs). */
export interface BrokerCredentials {
  setCredential(call: CallFor, credential: BridgeCredentialUpsertBody): Promise<void>;
  removeCredential(call: CallFor, deviceId: string): Promise<void>;
}

/** Messages to devices (what light-command, meter and system-files need). */
export interface MessagePublisher {
  publish(call: CallFor, message: OutgoingMessage): Promise<Published>;
}

export interface BridgeClientOptions extends ServiceClientOptions {
  /**
   * Send the messages published in one event-loop turn as one bridge.message.publish.batch
   * request (PublishBatcher); default true. Each publish keeps its own outcome and deadline.
   */
  batchPublishes?: boolean;
}

/** The QoS the device protocol gives a topic, or undefined for topics it does not define. */
export function protocolQos(topic: string): 0 | 1 | 2 | undefined {
  if (/\/sys\/exe$/.test(topic)) return 2;
  if (/\/cmd\/[^/]+$/.test(topic)) return 1;
  return undefined;
}

export const brokerUnavailable = (): ServiceUnavailableError =>
  new ServiceUnavailableError('The device broker could not be reached; nothing was changed.', 'broker_unavailable');

export const publishFailed = (): ServiceUnavailableError =>
  new ServiceUnavailableError('The command could not be delivered to the device broker; retry shortly.', 'publish_failed');

export class BridgeClient implements BrokerCredentials, MessagePublisher {
  private readonly batcher?: PublishBatcher;

  constructor(
    private readonly bus: Bus,
    private readonly options: BridgeClientOptions,
  ) {
    if (options.batchPublishes !== false) {
      this.batcher = new PublishBatcher({ bus, timeoutMs: options.timeoutMs, logger: options.logger, publishAlone: (call, body) => this.publishAlone(call, body), failure: publishFailed });
    }
  }

  async setCredential(call: CallFor, credential: BridgeCredentialUpsertBody): Promise<void> {
    await this.call('bridge.credential.upsert', call, { ...credential }, brokerUnavailable);
  }

  async removeCredential(call: CallFor, deviceId: string): Promise<void> {
    await this.call('bridge.credential.delete', call, { device_id: deviceId }, brokerUnavailable);
  }

  async publish(call: CallFor, message: OutgoingMessage): Promise<Published> {
    const qos = (message.qosAsGiven ? message.qos : undefined) ?? protocolQos(message.topic) ?? message.qos ?? 1;
    const body = { topic: message.topic, payload: message.payload, qos, retain: message.retain ?? false };
    return this.batcher ? this.batcher.publish(call, body) : this.publishAlone(call, body);
  }

  private async publishAlone(call: CallFor, body: BridgeMessagePublishBody): Promise<Published> {
    const published = await this.call('bridge.message.publish', call, body, publishFailed);
    // The bus checked the reply against its schema; a bridge that answered no body is a bug.
    if (!published) throw new Error('the bridge answered a publish without its body');
    return published;
  }

  private async call<S extends BridgeSubject>(subject: S, call: CallFor, body: BodyOf<S>, failure: () => ServiceUnavailableError): Promise<ReplyBodyOf<S> | undefined> {
    let reply;
    try {
      reply = await this.bus.request(
        subject,
        { request_id: call.requestId, params: {}, query: {}, body } as RequestOf<S>,
        { timeoutMs: this.options.timeoutMs, deadline: call.deadline },
      );
    } catch (err) {
      // A body its schema refuses is the caller's bug, not an outage: it is not retried as a 503.
      if (err instanceof ContractViolation) throw err;
      this.options.logger.warn({ err, subject, request_id: call.requestId }, 'bridge not reached');
      throw failure();
    }
    if (!reply.ok) {
      this.options.logger.warn({ subject, request_id: call.requestId, status: reply.error.status, code: reply.error.code, reason: reply.error.message }, 'bridge refused');
      throw failure();
    }
    return reply.body;
  }
}
