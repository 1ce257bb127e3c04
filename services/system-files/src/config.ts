import { baseConfigSchema, envFlag, loadConfig, z } from '@fleet/service-kit';
import { TOPIC_ROOT_PATTERN, TOPIC_ROOT_RULE } from '@fleet/device-protocol';

const schema = baseConfigSchema.extend({
  HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(9105),
  DATABASE_URL: z.string().default('postgresql://postgres@127.0.0.1:5432/fleet_system_files'),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).default(10),
  /** Topic roots (device protocol: `<root>/<device_id>/...`). */
  LIGHT_TOPIC_ROOT: z.string().regex(TOPIC_ROOT_PATTERN, TOPIC_ROOT_RULE).default('light'),
  METER_TOPIC_ROOT: z.string().regex(TOPIC_ROOT_PATTERN, TOPIC_ROOT_RULE).default('meter'),
  /** Prefix of every subject this service uses (DEVICE_IN subjects and the bridge/registry requests); tests isolate with it. */
  SUBJECT_PREFIX: z.string().regex(/^([A-Za-z0-9_-]+\.)*$/).default(''),
  DEVICE_IN_STREAM: z.string().default('DEVICE_IN'),
  /** The durable consumer of `sys/*` traffic every replica shares. */
  SYSTEM_CONSUMER: z.string().regex(/^[A-Za-z0-9_-]+$/).default('system-files-sys'),
  INGEST_BATCH: z.coerce.number().int().min(1).max(5000).default(500),
  /** The durable consumer of device-registry's device events (REGISTRY_EVENTS): removals missed while down are applied on start. */
  DEVICE_EVENTS_CONSUMER: z.string().regex(/^[A-Za-z0-9_-]+$/).default('system-files-device-events'),
  /** How long a request to the bridge or the registry may take; below the gateway's bus timeout. */
  DOWNSTREAM_TIMEOUT_MS: z.coerce.number().int().positive().default(2000),

  /** The file server: device downloads (signed URLs) and the gateway's upload stream. 0 = any free port. */
  FILES_HTTP_PORT: z.coerce.number().int().min(0).max(65535).default(9180),
  FILES_HTTP_HOST: z.string().default('0.0.0.0'),
  /** Base URL devices download from (https in production, behind the ingress); default http://127.0.0.1:<port>. */
  FILES_PUBLIC_URL: z.string().url().optional(),
  /** Base URL the gateway streams uploads to (inside the cluster); default http://127.0.0.1:<port>. */
  FILES_INTERNAL_URL: z.string().url().optional(),
  /** Key of the signed download URLs and upload tickets (shared by every replica). Generated per process when absent (one replica only). */
  FILES_URL_SECRET: z.string().min(32).optional(),
  /** How long a signed download URL is valid. */
  DOWNLOAD_URL_TTL_SECONDS: z.coerce.number().int().min(60).default(3600),
  /** Largest platform file (bytes). */
  UPLOAD_MAX_BYTES: z.coerce.number().int().min(1).default(32 * 1024 * 1024),
  /** Names in files/ or firmware/ that may not be deleted, comma separated. */
  PROTECTED_FILE_NAMES: z.string().default('ca.pem'),

  /** Storage backend of platform files: local (a directory; the default) or s3 (S3-compatible object storage). */
  FILE_STORAGE: z.enum(['local', 's3']).default('local'),
  FILE_STORAGE_DIR: z.string().default('.fleet/files'),
  S3_BUCKET: z.string().optional(),
  S3_REGION: z.string().default('us-east-1'),
  /** An S3-compatible endpoint (MinIO, Ceph, R2); AWS when absent. */
  S3_ENDPOINT: z.string().url().optional(),
  S3_FORCE_PATH_STYLE: envFlag(false),
  /** Prefix of every object key. */
  S3_PREFIX: z.string().default(''),

  /** File push: how long the device has to acknowledge addfile, and how transfers correlate. */
  TRANSFER_ACK_TIMEOUT_SECONDS: z.coerce.number().int().min(5).default(300),
  TRANSFER_CORR_MODE: z.enum(['envelope', 'url_token']).default('envelope'),
  TRANSFER_RETENTION_DAYS: z.coerce.number().int().min(1).default(30),
  /** How often transfers past their deadline are settled as timed_out. */
  TRANSFER_SWEEP_MS: z.coerce.number().int().min(100).default(1000),
  /** How long response-feed rows are kept. */
  RESPONSE_RETENTION_DAYS: z.coerce.number().int().min(1).default(30),
});

export type SystemConfig = z.infer<typeof schema>;

export function readSystemConfig(env: Record<string, string | undefined> = process.env): SystemConfig {
  const config = loadConfig(schema, env);
  if (config.FILE_STORAGE === 's3' && !config.S3_BUCKET) throw new Error('invalid configuration: S3_BUCKET is required with FILE_STORAGE=s3');
  return config;
}

/** The DEVICE_IN filter of system traffic (sys/resp, sys/settings) of every product. */
export const systemFilter = (config: Pick<SystemConfig, 'SUBJECT_PREFIX'>): string => `${config.SUBJECT_PREFIX}dev.in.*.*.sys.>`;
