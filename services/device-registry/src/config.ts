import fs from 'node:fs';
import { TOPIC_ROOT_PATTERN, TOPIC_ROOT_RULE } from '@fleet/device-protocol';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { baseConfigSchema, loadConfig, z } from '@fleet/service-kit';

/** An MQTT topic root: one or more non-empty levels without wildcards (as mqtt-bridge's). */
const topicRoot = z.string().regex(TOPIC_ROOT_PATTERN, TOPIC_ROOT_RULE);

const schema = baseConfigSchema.extend({
  HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(9101),
  DATABASE_URL: z.string().default('postgresql://postgres@127.0.0.1:5432/fleet_device_registry'),
  NODE_ENV: z.string().optional(),
  /** base64 of 32 bytes: encrypts each device's settings key at rest. Required in production. */
  SETTINGS_KEY_ENCRYPTION_KEY: z.string().optional(),
  /** Outside production, where a generated key is kept when SETTINGS_KEY_ENCRYPTION_KEY is unset. */
  SETTINGS_KEY_FILE: z.string().optional(),
  /** How long a request to the bridge may take; below the gateway's bus timeout so a 503 is ours to give. */
  BRIDGE_REQUEST_TIMEOUT_MS: z.coerce.number().int().positive().default(2000),
  CONNECTIVITY_STREAM: z.string().default('DEVICE_EVENTS'),
  // Every version of the bridge's connectivity batches (today .v1; the unversioned subject of
  // earlier bridges too, so batches stored before an upgrade are still applied).
  CONNECTIVITY_SUBJECT: z.string().default('evt.bridge.connectivity.>'),
  CONNECTIVITY_CONSUMER: z.string().default('registry-connectivity'),
  /** About 25 minutes without any report from a device disconnects it. */
  CONNECTIVITY_SILENCE_SECONDS: z.coerce.number().positive().default(1500),
  CONNECTIVITY_SWEEP_INTERVAL_SECONDS: z.coerce.number().positive().default(60),
  TELEMETRY_STREAM: z.string().default('DEVICE_IN'),
  TELEMETRY_FILTER: z.string().default('dev.in.*.*.tele.>'),
  TELEMETRY_CONSUMER: z.string().default('registry-telemetry'),
  TELEMETRY_RETENTION_DAYS: z.coerce.number().positive().default(30),
  TELEMETRY_RETENTION_INTERVAL_SECONDS: z.coerce.number().positive().default(3600),
  /**
   * Where the broker finds device credentials: `dynsec` (mqtt-bridge mirrors each into
   * Mosquitto's dynamic-security plugin; the embedded default) or `hook` (only in Postgres: the
   * broker asks the hook below at every CONNECT, PUBLISH and SUBSCRIBE). Either way the record
   * holds the broker password's hash.
   */
  BROKER_CREDENTIALS: z.enum(['dynsec', 'hook']).default('dynsec'),
  /** HTTP port of the broker authentication and authorization hook; 0: not served. */
  BROKER_HOOK_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  /** How long the hook may answer from a device row it read (at most 1 s: a removed device is refused within a second). */
  BROKER_HOOK_CACHE_MS: z.coerce.number().int().min(0).max(1000).default(1000),
  /**
   * The platform's own broker identity, which the hook lets use any client id and topic:
   * mqtt-bridge's MQTT_ADMIN_USERNAME / MQTT_ADMIN_PASSWORD, which these default to.
   */
  BROKER_PLATFORM_USERNAME: z.string().min(1).optional(),
  BROKER_PLATFORM_PASSWORD: z.string().min(1).optional(),
  MQTT_ADMIN_USERNAME: z.string().min(1).default('fleet-admin'),
  MQTT_ADMIN_PASSWORD: z.string().min(1).optional(),
  /** The broker, for cutting a removed device off in `hook` mode. */
  MQTT_URL: z.string().default('mqtt://127.0.0.1:1883'),
  LIGHT_TOPIC_ROOT: topicRoot.default('light'),
  METER_TOPIC_ROOT: topicRoot.default('meter'),
});

export type RegistryConfig = z.infer<typeof schema>;

/** The settings key-encryption key, decoded; throws when it is not 32 bytes of base64. */
export function decodeKek(value: string): Buffer {
  const key = Buffer.from(value, 'base64');
  if (key.length !== 32 || key.toString('base64').replace(/=+$/, '') !== value.trim().replace(/=+$/, '')) {
    throw new Error('invalid configuration: SETTINGS_KEY_ENCRYPTION_KEY must be the base64 of 32 bytes');
  }
  return key;
}

/** The repository's `.fleet/` folder (local, never committed). */
const LOCAL_STATE_DIR = path.resolve(__dirname, '../../../.fleet');

/**
 * The key that encrypts settings keys at rest. In production it must come from
 * SETTINGS_KEY_ENCRYPTION_KEY (the service refuses to start without it). For local development
 * and tests, when unset, a random key is generated once and kept in `.fleet/` with mode 0600,
 * so every run on this machine can read what earlier runs stored.
 */
export function settingsKek(config: RegistryConfig): Buffer {
  if (config.SETTINGS_KEY_ENCRYPTION_KEY) return decodeKek(config.SETTINGS_KEY_ENCRYPTION_KEY);
  if (config.NODE_ENV === 'production') {
    throw new Error('invalid configuration: SETTINGS_KEY_ENCRYPTION_KEY is required in production');
  }
  const file = config.SETTINGS_KEY_FILE ?? path.join(LOCAL_STATE_DIR, 'device-registry-settings-kek');
  try {
    return decodeKek(fs.readFileSync(file, 'utf8').trim());
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  // Written aside then linked into place: a reader never sees a half-written key, and when
  // two processes race the first link wins and both use that key.
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  fs.writeFileSync(temp, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  try {
    fs.linkSync(temp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    fs.unlinkSync(temp);
  }
  return decodeKek(fs.readFileSync(file, 'utf8').trim());
}

export function readRegistryConfig(env: Record<string, string | undefined> = process.env): RegistryConfig {
  const config = loadConfig(schema, env);
  if ((config.BROKER_CREDENTIALS === 'hook' || config.BROKER_HOOK_PORT > 0) && !platformIdentity(config).password) {
    throw new Error('invalid configuration: BROKER_PLATFORM_PASSWORD (or MQTT_ADMIN_PASSWORD) is required with BROKER_CREDENTIALS=hook or a BROKER_HOOK_PORT');
  }
  return config;
}

/** The platform's broker identity (readRegistryConfig refuses a hook without its password). */
export function platformIdentity(config: RegistryConfig): { username: string; password: string } {
  return { username: config.BROKER_PLATFORM_USERNAME ?? config.MQTT_ADMIN_USERNAME, password: config.BROKER_PLATFORM_PASSWORD ?? config.MQTT_ADMIN_PASSWORD ?? '' };
}
