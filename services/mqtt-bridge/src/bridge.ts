import type { IPublishPacket } from 'mqtt';
import { ErrorCode, type NatsError } from 'nats';
import type { ServiceRuntime } from '@fleet/service-kit';
import { ControlConnection, ORIGIN_PROPERTY, PLATFORM_ORIGIN } from './broker/control';
import { DeviceCredentials } from './broker/credentials';
import { TrafficConnection } from './broker/traffic';
import { ConnectivityPublisher } from './capture/connectivity-publisher';
import { DeviceInWriter } from './capture/device-in';
import { deviceEventsStream, deviceInStream, ensureStream } from './capture/streams';
import type { BridgeConfig } from './config';
import { isStatusTopic, parseDeviceTopic, sharedSubscriptions, type TopicRoots } from './domain/topics';
import { deleteCredentialHandler, upsertCredentialHandler } from './handlers/credentials';
import { publishHandler } from './handlers/publish';

/** NATS errors that retrying cannot fix: the message is logged and dropped (acknowledged). */
const PERMANENT = new Set<string>([ErrorCode.MaxPayloadExceeded, ErrorCode.BadHeader, ErrorCode.BadSubject, ErrorCode.BadPayload, ErrorCode.InvalidPayload]);

export interface Bridge {
  /** MQTT connections up (NATS is the runtime's own check). */
  isConnected(): boolean;
  /** Device messages this replica stored in DEVICE_IN since it started. */
  captured(): number;
}

/**
 * Wires the bridge into a started runtime: streams, broker connections, request handlers,
 * the capture of device traffic and connectivity batches, and the shutdown order.
 */
export async function startBridge(config: BridgeConfig, runtime: ServiceRuntime): Promise<Bridge> {
  const { logger, bus } = runtime;
  const prefix = config.SUBJECT_PREFIX;
  const roots: TopicRoots = { light: config.LIGHT_TOPIC_ROOT, meter: config.METER_TOPIC_ROOT };
  const nc = bus.connection;
  const jsm = await nc.jetstreamManager();
  await ensureStream(jsm, deviceInStream(config.DEVICE_IN_STREAM, prefix, config.DEVICE_IN_RETENTION_HOURS), logger);
  await ensureStream(jsm, deviceEventsStream(config.DEVICE_EVENTS_STREAM, prefix), logger);
  const js = nc.jetstream();
  const writer = new DeviceInWriter(js, prefix, config.DEVICE_IN_STREAM);

  const clientBase = `bridge-${config.SERVICE_INSTANCE}`;
  const control = new ControlConnection({
    url: config.MQTT_URL,
    clientId: `${clientBase}-ctl`,
    username: config.MQTT_ADMIN_USERNAME,
    password: config.MQTT_ADMIN_PASSWORD,
    dynsecTimeoutMs: config.DYNSEC_TIMEOUT_MS,
    publishTimeoutMs: config.MQTT_PUBLISH_TIMEOUT_MS,
    logger: logger.child({ component: 'mqtt-control' }),
  });
  runtime.onClose(() => control.close());
  await control.ready(30_000);
  const credentials = new DeviceCredentials(control, roots);
  await credentials.ensureBridgeRole(config.MQTT_ADMIN_USERNAME);

  const connectivity = new ConnectivityPublisher({
    js,
    subjectPrefix: prefix,
    stream: config.DEVICE_EVENTS_STREAM,
    flushMs: config.CONNECTIVITY_FLUSH_MS,
    maxEvents: config.CONNECTIVITY_BATCH_MAX,
    logger: logger.child({ component: 'connectivity' }),
  });
  connectivity.start();

  const captureLog = logger.child({ component: 'capture' });
  let captured = 0;
  const sink = async (packet: IPublishPacket, receivedAt: number): Promise<void> => {
    const device = parseDeviceTopic(packet.topic, roots);
    if (!device) {
      captureLog.debug({ topic: packet.topic }, 'not a device topic; ignored');
      return;
    }
    if (packet.properties?.userProperties?.[ORIGIN_PROPERTY] === PLATFORM_ORIGIN) {
      captureLog.debug({ topic: packet.topic }, 'sent by the platform; captured when sent');
      return;
    }
    const payload = Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload);
    try {
      await writer.write('in', { topic: packet.topic, device, payload, qos: packet.qos, retain: packet.retain, at: receivedAt });
      captured += 1;
    } catch (err) {
      const code = (err as NatsError).code;
      if (!PERMANENT.has(code)) throw err;
      captureLog.error({ err: (err as Error).message, topic: packet.topic, bytes: payload.length }, 'device message cannot be captured; dropped');
    }
    connectivity.record(device.deviceId, device.product, receivedAt, isStatusTopic(device) && payload.toString('utf8') === 'offline');
  };

  const traffic = new TrafficConnection(
    {
      url: config.MQTT_URL,
      clientId: clientBase,
      username: config.MQTT_ADMIN_USERNAME,
      password: config.MQTT_ADMIN_PASSWORD,
      subscriptions: sharedSubscriptions(config.MQTT_SHARE_GROUP, roots),
      sessionExpirySeconds: config.MQTT_SESSION_EXPIRY_S,
      receiveMaximum: config.MQTT_RECEIVE_MAXIMUM,
      logger: logger.child({ component: 'mqtt-traffic' }),
    },
    sink,
  );
  // Intake first: stop taking device messages, store what was taken, then flush presence.
  runtime.onClose(async () => {
    await traffic.stop();
    await connectivity.stop();
  }, 'intake');
  await traffic.ready(30_000);

  bus.serve(`${prefix}bridge.credential.upsert`, upsertCredentialHandler(credentials));
  bus.serve(`${prefix}bridge.credential.delete`, deleteCredentialHandler(credentials));
  bus.serve(`${prefix}bridge.message.publish`, publishHandler(control, writer, roots));

  return { isConnected: () => control.isConnected && traffic.isConnected, captured: () => captured };
}
