import os from 'node:os';
import { TOPIC_ROOT_PATTERN, TOPIC_ROOT_RULE } from '@fleet/device-protocol';
import { baseConfigSchema, loadConfig, z } from '@fleet/service-kit';

/** An MQTT topic root: one or more non-empty levels without wildcards. */
const topicRoot = z.string().regex(TOPIC_ROOT_PATTERN, TOPIC_ROOT_RULE);
/** Something NATS accepts inside a subject or stream name. */
const subjectPrefix = z.string().regex(/^([A-Za-z0-9_-]+\.)*$/, 'empty, or tokens each followed by a dot, e.g. "t1."');
const streamName = z.string().regex(/^[A-Za-z0-9_-]+$/);

const schema = baseConfigSchema.extend({
  HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(9106),
  MQTT_URL: z.string().default('mqtt://127.0.0.1:1883'),
  /**
   * `dynsec`: device credentials are mirrored into Mosquitto's dynamic-security plugin (the
   * embedded default). `hook`: the broker asks device-registry's authentication hook, and
   * MQTT_ADMIN_USERNAME / MQTT_ADMIN_PASSWORD are the platform identity the hook knows
   * (device-registry's BROKER_PLATFORM_USERNAME / BROKER_PLATFORM_PASSWORD).
   */
  BROKER_AUTH: z.enum(['dynsec', 'hook']).default('dynsec'),
  MQTT_ADMIN_USERNAME: z.string().min(1),
  MQTT_ADMIN_PASSWORD: z.string().min(1),
  /** Every replica joins this shared-subscription group, so each device message goes to one of them. */
  MQTT_SHARE_GROUP: z.string().regex(/^[^#+/\s]+$/).default('fleet-bridge'),
  /** How long the broker keeps a replica's session (and the messages queued for it) while it is away. */
  MQTT_SESSION_EXPIRY_S: z.coerce.number().int().min(0).default(86_400),
  /** MQTT 5 Receive Maximum: unacknowledged QoS 1 messages the broker may have in flight to a replica. */
  MQTT_RECEIVE_MAXIMUM: z.coerce.number().int().min(1).max(65_535).default(1000),
  /** How often a replica that does not hold the backstop session checks that another one does. */
  MQTT_BACKSTOP_CHECK_MS: z.coerce.number().int().positive().default(5000),
  LIGHT_TOPIC_ROOT: topicRoot.default('light'),
  METER_TOPIC_ROOT: topicRoot.default('meter'),
  DEVICE_IN_RETENTION_HOURS: z.coerce.number().positive().default(72),
  DEVICE_IN_STREAM: streamName.default('DEVICE_IN'),
  DEVICE_EVENTS_STREAM: streamName.default('DEVICE_EVENTS'),
  /**
   * Put before every NATS subject the bridge serves or publishes (dev.in.>, dev.out.>,
   * evt.bridge.>, bridge.*), e.g. "t1." for a test run sharing a NATS server. Empty in production.
   */
  SUBJECT_PREFIX: subjectPrefix.default(''),
  /** Connectivity batches: flushed at this interval or at CONNECTIVITY_BATCH_MAX events. */
  CONNECTIVITY_FLUSH_MS: z.coerce.number().int().positive().default(1000),
  CONNECTIVITY_BATCH_MAX: z.coerce.number().int().min(1).max(1000).default(1000),
  /** Publish to devices and broker admin requests fail after this long. */
  MQTT_PUBLISH_TIMEOUT_MS: z.coerce.number().int().positive().default(5000),
  DYNSEC_TIMEOUT_MS: z.coerce.number().int().positive().default(5000),
  /** The `debug` module's variable: when set, mqtt.js's own packet trace is kept (`DEBUG=mqttjs*`). */
  DEBUG: z.string().optional(),
});

export type BridgeConfig = z.infer<typeof schema> & {
  SERVICE_INSTANCE: string;
  /** Whether mqtt.js traces its packets through `debug` (only when DEBUG is set; see broker/lifecycle.ts). */
  MQTT_CLIENT_TRACE: boolean;
};

export function readBridgeConfig(env: Record<string, string | undefined> = process.env): BridgeConfig {
  const config = loadConfig(schema, env);
  if (config.LIGHT_TOPIC_ROOT === config.METER_TOPIC_ROOT) throw new Error('invalid configuration: LIGHT_TOPIC_ROOT and METER_TOPIC_ROOT must differ');
  return { ...config, SERVICE_INSTANCE: config.SERVICE_INSTANCE ?? os.hostname(), MQTT_CLIENT_TRACE: Boolean(config.DEBUG) };
}
