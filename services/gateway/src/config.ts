import { baseConfigSchema, envFlag, loadConfig, z } from '@fleet/service-kit';

const schema = baseConfigSchema.extend({
  HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(9100),
  GATEWAY_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  GATEWAY_HOST: z.string().default('0.0.0.0'),
  DATABASE_URL: z.string().default('postgresql://postgres@127.0.0.1:5432/fleet_gateway'),
  REDIS_URL: z.string().default('redis://127.0.0.1:6379'),
  /** Prefix of every Redis key the gateway writes, so several fleets can share one Redis. */
  REDIS_KEY_PREFIX: z.string().default('gw:'),
  TLS_CERT_FILE: z.string().optional(),
  TLS_KEY_FILE: z.string().optional(),
  /** Refuse plain HTTP unless it came through a trusted proxy; on by default in production. */
  GATEWAY_REQUIRE_TLS: envFlag(process.env.NODE_ENV === 'production'),
  /** Comma list of proxy addresses/CIDRs whose X-Forwarded-* headers are believed. */
  TRUSTED_PROXIES: z.string().default(''),
  PUBLIC_BASE_URL: z.string().optional(),
  CONFIG_MUTATIONS_PER_MIN: z.coerce.number().int().positive().default(30),
  DESTRUCTIVE_PER_HOUR: z.coerce.number().int().positive().default(20),
  DEVICE_COMMAND_CEILING_PER_MIN: z.coerce.number().int().positive().default(120),
  /**
   * How long after a request's deadline (now + BUS_REQUEST_TIMEOUT_MS at dispatch) the gateway
   * still waits for the owning service's answer on routes that change something. Services commit
   * nothing after the deadline, so the grace only has to cover the time from a COMMIT just before
   * it to the reply, plus clock skew between hosts; with no answer by then the partner gets 503.
   */
  BUS_OUTCOME_GRACE_MS: z.coerce.number().int().min(0).default(1500),
  /**
   * How long after the deadline the gateway keeps waiting once the owning service said it is
   * committing (the envelope's commit_notice): a service that stalls between its COMMIT and its
   * reply (paused, swapped out, a long GC) still gets its outcome, 201 rather than a false 503.
   * Only a service that dies in that moment, or stalls longer, leaves the partner a 503 whose work
   * may have been stored.
   */
  BUS_COMMIT_WAIT_MS: z.coerce.number().int().min(0).default(15000),
  /**
   * V8's heap growing factor and young collection trigger, in percent (the service kit's
   * applyHeapSettings); 0 leaves V8's own. A relayed page of records allocates few JavaScript
   * objects and a megabyte of buffers, which only a collection frees; the answers themselves ask
   * for a young collection every few megabytes (http/answer-encoding.ts), so the trigger stays
   * V8's own: at 5 every small request paid for young collections about twelve times as frequent
   * (718 against 59 in a run of the lights bench; bench/README.md, account).
   */
  GATEWAY_HEAP_GROWING_PERCENT: z.coerce.number().int().min(0).max(1000).default(200),
  GATEWAY_MINOR_GC_TRIGGER_PERCENT: z.coerce.number().int().min(0).max(100).default(0),
});

export type GatewayConfig = z.infer<typeof schema>;

export function readGatewayConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  const config = loadConfig(schema, env);
  if (Boolean(config.TLS_CERT_FILE) !== Boolean(config.TLS_KEY_FILE)) {
    throw new Error('invalid configuration: TLS_CERT_FILE and TLS_KEY_FILE go together');
  }
  return config;
}
