import { baseConfigSchema, loadConfig, z } from '@fleet/service-kit';

const ms = (fallback: number) => z.coerce.number().int().positive().default(fallback);

const schema = baseConfigSchema.extend({
  HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(9103),
  DATABASE_URL: z.string().default('postgresql://postgres@127.0.0.1:5432/fleet_config_alerting'),
  /** How long a call to device-registry or light-command may take. */
  DOWNSTREAM_TIMEOUT_MS: ms(2500),
  /** Where sensor readings arrive (the bridge's capture stream) and the durable consumer reading them. */
  READINGS_STREAM: z.string().default('DEVICE_IN'),
  READINGS_FILTER: z.string().default('dev.in.light.*.tdl.>'),
  READINGS_CONSUMER: z.string().default('config-alerting-readings'),
  READINGS_BATCH: z.coerce.number().int().min(1).max(5000).default(1000),
  /** The durable consumer of the registry's device events (removals cascade to sensors). */
  DEVICE_EVENTS_CONSUMER: z.string().default('config-alerting-device-events'),
  /** The evaluation cycle: its period (the spec's "about 2 minutes"), shards, a replica's lease on a shard. */
  EVALUATION_PERIOD_MS: ms(120_000),
  EVALUATION_SHARDS: z.coerce.number().int().min(1).max(1024).default(16),
  /** Unset: half the period. It must be shorter than the period, or a dead replica's shards would miss their cycle. */
  EVALUATION_LEASE_MS: z.coerce.number().int().positive().optional(),
  /** The window the metrics look back over, and how long readings are kept. */
  METRICS_WINDOW_MS: ms(3_600_000),
  READINGS_RETENTION_MS: ms(172_800_000),
});

export type ConfigAlertingConfig = Omit<z.infer<typeof schema>, 'EVALUATION_LEASE_MS'> & { EVALUATION_LEASE_MS: number };

export function readConfigAlertingConfig(env: Record<string, string | undefined> = process.env): ConfigAlertingConfig {
  const config = loadConfig(schema, env);
  const lease = config.EVALUATION_LEASE_MS ?? Math.floor(config.EVALUATION_PERIOD_MS / 2);
  if (lease >= config.EVALUATION_PERIOD_MS) {
    throw new Error(`invalid configuration: EVALUATION_LEASE_MS (${lease}) must be shorter than EVALUATION_PERIOD_MS (${config.EVALUATION_PERIOD_MS})`);
  }
  return { ...config, EVALUATION_LEASE_MS: lease };
}
