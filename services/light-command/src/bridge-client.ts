import { ApiError, ServiceUnavailableError, type Bus, type Logger } from '@fleet/service-kit';

/** What reaches the broker, and when it took it. */
export interface Published {
  topic: string;
  payload: string;
  sent_at: string;
}

export interface CommandPublisher {
  /** `deadline`: the deadline of the request the command is sent for (epoch milliseconds); the bridge gets no more time than that. */
  publish(requestId: string, topic: string, payload: string, deadline?: number): Promise<Published>;
}

export const publishFailed = (): ServiceUnavailableError =>
  new ServiceUnavailableError('The command could not be delivered to the device broker; retry shortly.', 'publish_failed');

/**
 * Publishes commands through mqtt-bridge (`bridge.message.publish`, QoS 1, not retained). Any
 * failure (bridge down, slow, broker refused) is 503 publish_failed: the device got nothing.
 */
export class BridgePublisher implements CommandPublisher {
  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs: number,
    private readonly logger: Logger,
  ) {}

  async publish(requestId: string, topic: string, payload: string, deadline?: number): Promise<Published> {
    let reply;
    try {
      reply = await this.bus.request(
        'bridge.message.publish',
        { request_id: requestId, params: {}, query: {}, body: { topic, payload, qos: 1, retain: false } },
        { timeoutMs: this.timeoutMs, deadline },
      );
    } catch (err) {
      if (err instanceof ApiError) throw publishFailed();
      throw err;
    }
    if (!reply.ok) {
      this.logger.warn({ request_id: requestId, topic, error: reply.error.code }, 'bridge refused a command');
      throw publishFailed();
    }
    const body = (reply.body ?? {}) as Partial<Published>;
    return { topic, payload, sent_at: typeof body.sent_at === 'string' ? body.sent_at : new Date().toISOString() };
  }
}
