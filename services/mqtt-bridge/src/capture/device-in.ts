import { headers as natsHeaders, type JetStreamClient } from 'nats';
import { captureSubject, type DeviceTopic, type Direction } from '../domain/topics';

export interface CapturedMessage {
  topic: string;
  device: DeviceTopic;
  payload: Uint8Array;
  qos: number;
  retain: boolean;
  /** Epoch ms when the bridge took it off the network (or the broker took it, for dev.out). */
  at: number;
}

/**
 * Writes device traffic into DEVICE_IN: subject dev.<in|out>.<product>.<device>.<levels>,
 * the raw payload, and the MQTT facts as headers. Resolves with the stream's PubAck.
 */
export class DeviceInWriter {
  constructor(
    private readonly js: JetStreamClient,
    private readonly subjectPrefix: string,
    private readonly stream: string,
  ) {}

  async write(direction: Direction, message: CapturedMessage): Promise<void> {
    const h = natsHeaders();
    // A header value cannot hold CR or LF; such a topic (odd but legal MQTT) is kept percent-encoded there.
    h.set('Mqtt-Topic', /[\r\n]/.test(message.topic) ? message.topic.replace(/[\r\n%]/g, (c) => encodeURIComponent(c)) : message.topic);
    h.set('Received-At', new Date(message.at).toISOString());
    h.set('Mqtt-Retain', message.retain ? '1' : '0');
    h.set('Mqtt-Qos', String(message.qos));
    await this.js.publish(captureSubject(this.subjectPrefix, direction, message.device), message.payload, {
      headers: h,
      expect: { streamName: this.stream },
    });
  }
}
