import { randomBytes } from 'node:crypto';
import type { SubjectsOf } from '@fleet/contracts';
import type { ServiceHandlers, ServiceRuntime } from '@fleet/service-kit';
import { Backstop } from './broker/backstop';
import { ControlConnection, ORIGIN_PROPERTY, PLATFORM_ORIGIN } from './broker/control';
import { DeviceCredentials } from './broker/credentials';
import { TrafficConnection, type InboundMessage, type MessageSink } from './broker/traffic';
import { ConnectivityPublisher } from './capture/connectivity-publisher';
import { DeviceInWriter, type CaptureOutcome, type CaptureOwner } from './capture/device-in';
import { StreamKeeper } from './capture/stream-keeper';
import { deviceEventsStream, deviceInStream } from './capture/streams';
import type { BridgeConfig } from './config';
import { isStatusTopic, parseDeviceTopic, sharedSubscriptions, type DeviceTopic, type TopicRoots } from './domain/topics';
import { deleteCredentialHandler, upsertCredentialHandler } from './handlers/credentials';
import { publishBatchHandler, publishHandler } from './handlers/publish';
import { bridgeMetrics } from './capture/metrics';

export interface Bridge {
  /** MQTT connections up (NATS is the runtime's own check). */
  isConnected(): boolean;
  /** Device messages this replica stored in DEVICE_IN since it started (backstop included). */
  captured(): number;
  /** True while this replica holds the backstop session. */
  holdsBackstop(): boolean;
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
  const streams = new StreamKeeper(
    await nc.jetstreamManager(),
    [deviceInStream(config.DEVICE_IN_STREAM, prefix, config.DEVICE_IN_RETENTION_HOURS), deviceEventsStream(config.DEVICE_EVENTS_STREAM, prefix)],
    logger.child({ component: 'streams' }),
  );
  await streams.ensureAll();
  const onNoStream = () => streams.missing();
  const js = nc.jetstream();
  const clientBase = `bridge-${config.SERVICE_INSTANCE}`;
  const writer = new DeviceInWriter({
    nc,
    subjectPrefix: prefix,
    stream: config.DEVICE_IN_STREAM,
    outMsgIdPrefix: `${clientBase}-${randomBytes(4).toString('hex')}-out-`,
    onNoStream,
    logger: logger.child({ component: 'capture' }),
  });
  writer.start();
  runtime.onClose(() => writer.stop());

  const control = new ControlConnection({
    url: config.MQTT_URL,
    clientId: `${clientBase}-ctl`,
    username: config.MQTT_ADMIN_USERNAME,
    password: config.MQTT_ADMIN_PASSWORD,
    dynsecTimeoutMs: config.DYNSEC_TIMEOUT_MS,
    publishTimeoutMs: config.MQTT_PUBLISH_TIMEOUT_MS,
    trace: config.MQTT_CLIENT_TRACE,
    logger: logger.child({ component: 'mqtt-control' }),
  });
  runtime.onClose(() => control.close());
  await control.ready(30_000);
  // With BROKER_AUTH=hook the broker reads credentials from the registry's hook: there is no
  // dynamic-security plugin to keep, and the registry never asks for a credential change.
  const credentials = config.BROKER_AUTH === 'dynsec' ? new DeviceCredentials(control, roots) : undefined;
  await credentials?.ensureBridgeRole(config.MQTT_ADMIN_USERNAME);

  const connectivity = new ConnectivityPublisher({
    js,
    subjectPrefix: prefix,
    stream: config.DEVICE_EVENTS_STREAM,
    flushMs: config.CONNECTIVITY_FLUSH_MS,
    maxEvents: config.CONNECTIVITY_BATCH_MAX,
    onNoStream,
    logger: logger.child({ component: 'connectivity' }),
  });
  connectivity.start();

  const captureLog = logger.child({ component: 'capture' });
  const sink: MessageSink = {
    take(message) {
      const { packet } = message;
      const device = parseDeviceTopic(packet.topic, roots);
      if (!device) {
        captureLog.debug({ topic: packet.topic }, 'not a device topic; ignored');
        message.captureDone('skipped');
        return;
      }
      if (packet.properties?.userProperties?.[ORIGIN_PROPERTY] === PLATFORM_ORIGIN) {
        captureLog.debug({ topic: packet.topic }, 'sent by the platform; captured when sent');
        message.captureDone('skipped');
        return;
      }
      const payload = Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload);
      if (packet.retain && payload.length === 0 && isStatusTopic(device)) {
        // An empty retained status only clears the topic's retained message: no device reports
        // one. The registry sends it when it cuts a removed device off a hook-mode broker, over
        // MQTT 3.1.1, which carries no origin property: it is neither captured nor presence.
        captureLog.debug({ topic: packet.topic }, 'retained status cleared; no device report');
        message.captureDone('skipped');
        return;
      }
      const offline = isStatusTopic(device) && payload.toString('utf8') === 'offline';
      writer.capture('in', { topic: packet.topic, device, payload, qos: packet.qos, retain: packet.retain, at: message.receivedAt }, message.msgId, new DeviceCapture(message, device, offline));
    },
  };

  /** Presence counts once the message is stored (or refused for good), as the capture it comes from. */
  class DeviceCapture implements CaptureOwner {
    constructor(
      private readonly message: InboundMessage,
      private readonly device: DeviceTopic,
      private readonly offline: boolean,
    ) {}

    captureDone(outcome: CaptureOutcome): void {
      const product = this.device.product;
      bridgeMetrics.messages.inc({ direction: 'in', product, outcome });
      if (outcome === 'stored') bridgeMetrics.captureSeconds.observe({ product }, (Date.now() - this.message.receivedAt) / 1000);
      if (outcome !== 'abandoned') connectivity.record(this.device.deviceId, this.device.product, this.message.receivedAt, this.offline);
      this.message.captureDone(outcome);
    }

    retryWanted(): boolean {
      return this.message.retryWanted();
    }
  }

  const traffic = new TrafficConnection(
    {
      url: config.MQTT_URL,
      clientId: clientBase,
      username: config.MQTT_ADMIN_USERNAME,
      password: config.MQTT_ADMIN_PASSWORD,
      subscriptions: sharedSubscriptions(config.MQTT_SHARE_GROUP, roots),
      sessionExpirySeconds: config.MQTT_SESSION_EXPIRY_S,
      receiveMaximum: config.MQTT_RECEIVE_MAXIMUM,
      // Called after connecting, which is never before `backstop` below is set.
      onSubscribed: () => backstop.shareGroupSubscribed(),
      trace: config.MQTT_CLIENT_TRACE,
      logger: logger.child({ component: 'mqtt-traffic' }),
    },
    sink,
  );
  const backstop = new Backstop({
    url: config.MQTT_URL,
    username: config.MQTT_ADMIN_USERNAME,
    password: config.MQTT_ADMIN_PASSWORD,
    group: config.MQTT_SHARE_GROUP,
    roots,
    sessionExpirySeconds: config.MQTT_SESSION_EXPIRY_S,
    receiveMaximum: config.MQTT_RECEIVE_MAXIMUM,
    checkMs: config.MQTT_BACKSTOP_CHECK_MS,
    holderSubject: `${prefix}bridge.backstop.holder`,
    instance: config.SERVICE_INSTANCE,
    nc,
    control,
    traffic,
    sink,
    trace: config.MQTT_CLIENT_TRACE,
    logger: logger.child({ component: 'mqtt-backstop' }),
  });
  backstop.start();
  // Intake first: stop taking device messages, store what was taken, then flush presence.
  runtime.onClose(async () => {
    await Promise.all([traffic.stop(), backstop.stop()]);
    await connectivity.stop();
  }, 'intake');
  await traffic.ready(30_000);

  const handlers: ServiceHandlers<SubjectsOf<'mqtt-bridge'>> = {
    'bridge.credential.upsert': upsertCredentialHandler(credentials),
    'bridge.credential.delete': deleteCredentialHandler(credentials),
    'bridge.message.publish': publishHandler({ control, writer, roots }),
    'bridge.message.publish.batch': publishBatchHandler({ control, writer, roots }),
  };
  bus.serveAll(handlers);

  return {
    isConnected: () => control.isConnected && traffic.isConnected && backstop.isReady,
    captured: () => traffic.stored + backstop.stored,
    holdsBackstop: () => backstop.holding,
  };
}
