import type { BridgeMessagePublishBody } from '@fleet/contracts';
import { mqttStringProblem } from '@fleet/device-protocol';
import { ApiError, ServiceUnavailableError, ValidationError, type Logger, type RequestHandler } from '@fleet/service-kit';
import type { ControlConnection } from '../broker/control';
import type { DeviceInWriter } from '../capture/device-in';
import { parseDeviceTopic, type TopicRoots } from '../domain/topics';
import { bridgeMetrics } from '../capture/metrics';

interface PublishDeps {
  control: ControlConnection;
  writer: DeviceInWriter;
  roots: TopicRoots;
}

/**
 * One message to the broker: resolves with the time the broker took it (PUBACK for QoS 1,
 * PUBCOMP for QoS 2); 503 publish_failed otherwise. A message to a device topic is then
 * captured into DEVICE_IN as dev.out.* (a capture failure is logged, since the device has the
 * message already). A topic the broker would refuse is 400 before anything is sent: Mosquitto
 * answers one by closing the connection every caller shares.
 */
async function publishOne({ control, writer, roots }: PublishDeps, message: BridgeMessagePublishBody, logger: Logger): Promise<number> {
  const problem = mqttStringProblem(message.topic);
  if (problem) throw new ValidationError(`'topic' may not contain ${problem}`);
  const payload = Buffer.from(message.payload, 'utf8');
  const device = parseDeviceTopic(message.topic, roots);
  const product = device?.product ?? 'other';
  try {
    await control.publish(message.topic, payload, message.qos, message.retain);
  } catch (err) {
    bridgeMetrics.messages.inc({ direction: 'out', product, outcome: 'failed' });
    logger.warn({ err: (err as Error).message, topic: message.topic }, 'publish failed');
    throw new ServiceUnavailableError('The broker could not take the message.', 'publish_failed');
  }
  bridgeMetrics.messages.inc({ direction: 'out', product, outcome: 'sent' });
  const sentAt = Date.now();
  if (device) {
    try {
      await writer.write('out', { topic: message.topic, device, payload, qos: message.qos, retain: message.retain, at: sentAt });
    } catch (err) {
      logger.error({ err: (err as Error).message, topic: message.topic }, 'sent message not captured into DEVICE_IN');
    }
  } else {
    logger.debug({ topic: message.topic }, 'not a device topic; not captured');
  }
  return sentAt;
}

/** bridge.message.publish: answers {topic, payload, sent_at} once the broker took the message. */
export function publishHandler(deps: PublishDeps): RequestHandler<'bridge.message.publish'> {
  return async ({ body }, { logger }) => {
    const sentAt = await publishOne(deps, body, logger);
    return { body: { topic: body.topic, payload: body.payload, sent_at: new Date(sentAt).toISOString() } };
  };
}

/**
 * bridge.message.publish.batch: every message published at once, each exactly as
 * bridge.message.publish publishes it; one outcome per message, in order, once all are settled.
 * One message failing does not hold back the others.
 */
export function publishBatchHandler(deps: PublishDeps): RequestHandler<'bridge.message.publish.batch'> {
  return async ({ body }, { logger }) => {
    const results = await Promise.all(
      body.messages.map(async ({ request_id: requestId, ...message }) => {
        try {
          const sentAt = await publishOne(deps, message, requestId ? logger.child({ request_id: requestId }) : logger);
          return { sent_at: new Date(sentAt).toISOString() };
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          return { error: { status: err.status as 400 | 503, code: err.code, message: err.message } };
        }
      }),
    );
    return { body: { results } };
  };
}
