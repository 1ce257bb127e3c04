import mqtt from 'mqtt';
import type { Logger } from '@fleet/service-kit';
import type { Product } from '../domain/products';
import type { TopicRoots } from '../domain/broker-access';
import type { PlatformIdentity } from './broker-hook';

/**
 * Cuts a removed device off a broker that reads credentials through the hook. The broker holds
 * no credential to delete, so the registry connects with the device's client id under the
 * platform identity: every MQTT broker then closes the device's connection (a session
 * takeover, MQTT 3.1.1 §3.1.4), and the device's next CONNECT is refused by the hook. Plain
 * MQTT 3.1.1, so it works on EMQX, RabbitMQ, VerneMQ, HiveMQ and Mosquitto alike.
 *
 * The device's last will (a retained `offline` status) may be refused once its record is gone,
 * so the retained status is cleared in the same session: a removed device leaves no `online`
 * behind for later subscribers.
 */
export class SessionTakeover {
  constructor(
    private readonly url: string,
    private readonly platform: PlatformIdentity,
    private readonly roots: TopicRoots,
    private readonly logger: Logger,
    private readonly timeoutMs = 3000,
  ) {}

  async cutOff(deviceId: string, product: Product): Promise<void> {
    const client = await mqtt.connectAsync(this.url, {
      clientId: deviceId,
      username: this.platform.username,
      password: this.platform.password,
      protocolVersion: 4,
      clean: true,
      reconnectPeriod: 0,
      connectTimeout: this.timeoutMs,
    });
    try {
      await client.publishAsync(`${this.roots[product]}/${deviceId}/status`, '', { qos: 1, retain: true });
    } finally {
      await client.endAsync();
    }
    this.logger.info({ device_id: deviceId }, 'removed device cut off the broker (session takeover)');
  }
}
