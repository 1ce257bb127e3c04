import { headers, StorageType, type JetStreamClient, type NatsConnection } from 'nats';
import { uniqueId } from './unique-id';

/**
 * A DEVICE_IN-like stream of a test's own: subjects `<prefix>dev.in.>` and `<prefix>dev.out.>`,
 * so a service under test consumes it with SUBJECT_PREFIX=<prefix> beside every other test.
 */
export async function createDeviceInStream(nc: NatsConnection, id = uniqueId('s')): Promise<{ name: string; prefix: string; drop(): Promise<void> }> {
  const name = `DEVICE_IN_${id}`;
  const prefix = `${id}.`;
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add({ name, subjects: [`${prefix}dev.in.>`, `${prefix}dev.out.>`], storage: StorageType.File });
  return {
    name,
    prefix,
    async drop() {
      await jsm.streams.delete(name).catch(() => undefined);
    },
  };
}

/** A device message as the bridge captures it: `levels` are the topic levels after the device id (`sys/resp`). */
export interface CapturedMessage {
  deviceId: string;
  levels: string;
  payload: string | object;
  product?: 'light' | 'meter';
  /** The topic root (default the product's name); a fleet may configure one of several levels. */
  root?: string;
  direction?: 'in' | 'out';
  receivedAt?: Date;
  msgId?: string;
}

/** Puts a message into a DEVICE_IN-like stream with the headers the bridge sets. */
export async function captureDeviceMessage(js: JetStreamClient, prefix: string, message: CapturedMessage): Promise<void> {
  const product = message.product ?? 'light';
  const h = headers();
  h.set('Mqtt-Topic', `${message.root ?? product}/${message.deviceId}/${message.levels}`);
  h.set('Received-At', (message.receivedAt ?? new Date()).toISOString());
  h.set('Mqtt-Retain', '0');
  h.set('Mqtt-Qos', '1');
  h.set('Nats-Msg-Id', message.msgId ?? uniqueId('msg'));
  const payload = typeof message.payload === 'string' ? message.payload : JSON.stringify(message.payload);
  await js.publish(`${prefix}dev.${message.direction ?? 'in'}.${product}.${message.deviceId}.${message.levels.replace(/\//g, '.')}`, Buffer.from(payload), { headers: h });
}
