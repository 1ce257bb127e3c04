import mqtt from 'mqtt';
import type { Logger } from '@fleet/service-kit';
import type { PlatformIdentity } from './broker-hook';

/**
 * Cuts a removed device off a broker that reads credentials through the hook. The broker holds
 * no credential to delete, so the registry connects with the device's client id under the
 * platform identity: every MQTT broker then closes the device's connection (a session
 * takeover, MQTT 3.1.1 §3.1.4), and the device's next CONNECT is refused by the hook. Plain
 * MQTT 3.1.1, so it works on EMQX, RabbitMQ, VerneMQ, HiveMQ and Mosquitto alike.
 */
export class SessionTakeover {
  constructor(
    private readonly url: string,
    private readonly platform: PlatformIdentity,
    private readonly logger: Logger,
    private readonly timeoutMs = 3000,
  ) {}

  async cutOff(deviceId: string): Promise<void> {
    const client = await mqtt.connectAsync(this.url, {
      clientId: deviceId,
      username: this.platform.username,
      password: this.platform.password,
      protocolVersion: 4,
      clean: true,
      reconnectPeriod: 0,
      connectTimeout: this.timeoutMs,
    });
    await client.endAsync();
    this.logger.info({ device_id: deviceId }, 'removed device cut off the broker (session takeover)');
  }
}
