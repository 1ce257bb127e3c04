import { baseConfigSchema, loadConfig, z } from '@fleet/service-kit';
import { TOPIC_ROOT_PATTERN, TOPIC_ROOT_RULE } from '@fleet/device-protocol';

const schema = baseConfigSchema.extend({
  HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(9102),
  DATABASE_URL: z.string().default('postgresql://postgres@127.0.0.1:5432/fleet_light_command'),
  /** Topic root of lights: commands go to `<root>/<device_id>/cmd/<channel>`. */
  LIGHT_TOPIC_ROOT: z.string().regex(TOPIC_ROOT_PATTERN, TOPIC_ROOT_RULE).default('light'),
  /** How long bridge.message.publish may take; below the gateway's bus timeout so the 503 is publish_failed. */
  BRIDGE_REQUEST_TIMEOUT_MS: z.coerce.number().int().positive().default(2500),
  /** Where device state reports arrive (the bridge's capture stream) and the durable consumer reading them. */
  STATE_STREAM: z.string().default('DEVICE_IN'),
  STATE_FILTER: z.string().default('dev.in.light.*.state.>'),
  STATE_CONSUMER: z.string().default('light-command-state'),
  /** The durable consumer of the registry's device events (REGISTRY_EVENTS): removals missed while down are applied on start. */
  DEVICE_EVENTS_CONSUMER: z.string().default('light-command-device-events'),
});

export type LightCommandConfig = z.infer<typeof schema>;

export function readLightCommandConfig(env: Record<string, string | undefined> = process.env): LightCommandConfig {
  return loadConfig(schema, env);
}

/** The admin CLI's configuration: the same settings, with no health port of its own. */
export function readAdminConfig(env: Record<string, string | undefined> = process.env): LightCommandConfig {
  return loadConfig(schema, { ...env, HEALTH_PORT: env.HEALTH_PORT ?? '0' });
}
