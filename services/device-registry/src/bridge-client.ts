import { ApiError, ServiceUnavailableError, fromEnvelopeError, type Bus } from '@fleet/service-kit';
import type { Product } from './domain/products';

/**
 * The bridge's fixed bus contract for broker credentials (see README). `deadline` is the deadline
 * of the request the change is made for (epoch milliseconds): the bridge gets no more time than
 * that request has left. Without one (a compensation after the request gave up), the client's own
 * timeout applies.
 */
export interface BrokerCredentials {
  upsert(requestId: string, credential: { device_id: string; product: Product; password: string }, deadline?: number): Promise<void>;
  remove(requestId: string, deviceId: string, deadline?: number): Promise<void>;
}

/** Asks mqtt-bridge over the bus; every failure (down, slow, refused) is a 503. */
export class BridgeClient implements BrokerCredentials {
  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs: number,
  ) {}

  async upsert(requestId: string, credential: { device_id: string; product: Product; password: string }, deadline?: number): Promise<void> {
    await this.call('bridge.credential.upsert', requestId, credential, deadline);
  }

  async remove(requestId: string, deviceId: string, deadline?: number): Promise<void> {
    await this.call('bridge.credential.delete', requestId, { device_id: deviceId }, deadline);
  }

  private async call(subject: string, requestId: string, body: Record<string, unknown>, deadline: number | undefined): Promise<void> {
    let reply;
    try {
      reply = await this.bus.request(subject, { request_id: requestId, params: {}, query: {}, body }, { timeoutMs: this.timeoutMs, deadline });
    } catch (err) {
      if (err instanceof ApiError && err.status === 503) {
        throw new ServiceUnavailableError('The device broker could not be reached; nothing was changed.', 'broker_unavailable');
      }
      throw err;
    }
    if (!reply.ok) {
      const err = fromEnvelopeError(reply.error);
      if (err.status === 503) throw err;
      throw new ServiceUnavailableError(`The device broker refused the change: ${err.message}`, 'broker_unavailable');
    }
  }
}
