import { mqttStringProblem } from '@fleet/device-protocol';
import { ServiceUnavailableError, ValidationError, type RequestHandler } from '@fleet/service-kit';
import type { ControlConnection } from '../broker/control';
import type { DeviceInWriter } from '../capture/device-in';
import { parseDeviceTopic, type TopicRoots } from '../domain/topics';
import { bridgeMetrics } from '../capture/metrics';

/**
 * bridge.message.publish: answers {topic, payload, sent_at} only once the broker took the
 * message (PUBACK for QoS 1, PUBCOMP for QoS 2); 503 publish_failed otherwise. A message to a
 * device topic is then captured into DEVICE_IN as dev.out.* (a capture failure is logged,
 * since the device has the message already). A topic the broker would refuse is 400 before
 * anything is sent: Mosquitto answers one by closing the connection every caller shares.
 */
export function publishHandler(control: ControlConnection, writer: DeviceInWriter, roots: TopicRoots): RequestHandler<'bridge.message.publish'> {
  return async ({ body }, { logger }) => {
    const problem = mqttStringProblem(body.topic);
    if (problem) throw new ValidationError(`'topic' may not contain ${problem}`);
    const payload = Buffer.from(body.payload, 'utf8');
    const device = parseDeviceTopic(body.topic, roots);
    const product = device?.product ?? 'other';
    try {
      await control.publish(body.topic, payload, body.qos, body.retain);
    } catch (err) {
      bridgeMetrics.messages.inc({ direction: 'out', product, outcome: 'failed' });
      logger.warn({ err: (err as Error).message, topic: body.topic }, 'publish failed');
      throw new ServiceUnavailableError('The broker could not take the message.', 'publish_failed');
    }
    bridgeMetrics.messages.inc({ direction: 'out', product, outcome: 'sent' });
    const sentAt = Date.now();
    if (device) {
      try {
        await writer.write('out', { topic: body.topic, device, payload, qos: body.qos, retain: body.retain, at: sentAt });
      } catch (err) {
        logger.error({ err: (err as Error).message, topic: body.topic }, 'sent message not captured into DEVICE_IN');
      }
    } else {
      logger.debug({ topic: body.topic }, 'not a device topic; not captured');
    }
    return { body: { topic: body.topic, payload: body.payload, sent_at: new Date(sentAt).toISOString() } };
  };
}
