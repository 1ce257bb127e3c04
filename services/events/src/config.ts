import { baseConfigSchema, envFlag, loadConfig, z } from '@fleet/service-kit';
import { parseRetrySchedule } from './domain/retry-schedule';



const schema = baseConfigSchema.extend({
  HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(9107),
  DATABASE_URL: z.string().default('postgresql://postgres@127.0.0.1:5432/fleet_events'),
  DATABASE_POOL_MAX: z.coerce.number().int().min(2).max(100).default(10),

  /** The live-stream server the gateway relays GET /v1/events from. 0 = any free port. */
  EVENTS_STREAM_PORT: z.coerce.number().int().min(0).max(65535).default(9181),
  EVENTS_STREAM_HOST: z.string().default('0.0.0.0'),
  /** Base URL at which the gateway reaches THIS replica's stream server; default http://<POD_IP>:<port>, else http://127.0.0.1:<port>. */
  EVENTS_STREAM_INTERNAL_URL: z.string().url().optional(),
  /** The replica's own address (Kubernetes: the pod IP from the downward API), for the default EVENTS_STREAM_INTERNAL_URL. */
  POD_IP: z.string().optional(),
  /** Open live streams a partner may hold at once, across every replica. */
  EVENTS_MAX_STREAMS_PER_PARTNER: z.coerce.number().int().min(1).default(5),
  /** How often a live stream sends a keep-alive comment. */
  EVENTS_KEEPALIVE_SECONDS: z.coerce.number().positive().default(15),

  /**
   * Key of the signing secrets at rest (AES-256-GCM), 32 bytes in base64; every replica the
   * same. Required in production (NODE_ENV=production); elsewhere a fixed development key is used.
   */
  WEBHOOK_SECRETS_KEY: z.string().optional(),
  /** Endpoints a partner may register. */
  WEBHOOKS_PER_PARTNER: z.coerce.number().int().min(1).default(20),
  /** Receivers on loopback and private addresses, and plain http, are allowed (the local fleet of `npm start` only); link-local and unspecified ones never are. */
  WEBHOOK_LOCAL_RECEIVERS: envFlag(false),
  /** How long a receiver has to answer one delivery. */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  /** Delays before each retry after a failed attempt (s, m, h suffixes); the attempt after the last delay is the last. */
  WEBHOOK_RETRY_SCHEDULE: z.string().default('5s,5m,30m,2h,5h,10h,10h,10h,10h,14h').transform((v, ctx) => {
    try {
      return parseRetrySchedule(v);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
      return z.NEVER;
    }
  }),
  /** Deliveries one replica sends at once, and to one endpoint at once. */
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).default(256),
  WEBHOOK_CONCURRENCY_PER_ENDPOINT: z.coerce.number().int().min(1).default(32),
  /** Days the delivery log keeps a settled delivery. */
  DELIVERY_RETENTION_DAYS: z.coerce.number().int().min(1).default(30),

  /** The partner events (JetStream) and the durable consumer that fans them out to endpoints. */
  PARTNER_EVENTS_STREAM: z.string().default('PARTNER_EVENTS'),
  FANOUT_CONSUMER: z.string().default('events-fanout'),
  /** How long a partner's permissions and grants, and a device's place in the org tree, are trusted before asked again. */
  ACCESS_CACHE_MS: z.coerce.number().int().min(0).default(5_000),
  /** How long a request to the gateway or the registry may take. */
  DOWNSTREAM_TIMEOUT_MS: z.coerce.number().int().positive().default(2000),
});

export type EventsConfig = z.infer<typeof schema>;

export function readEventsConfig(env: Record<string, string | undefined> = process.env): EventsConfig {
  return loadConfig(schema, env);
}

/** A fixed key for development only: secrets sealed with it are as good as plain text. */
const DEVELOPMENT_SECRETS_KEY = Buffer.alloc(32, 'fleet-events-development-key!!!!');

/** The key of the signing secrets at rest; refuses to start in production without one. */
export function secretsKeyOf(config: EventsConfig): Buffer {
  if (config.WEBHOOK_SECRETS_KEY) {
    const key = Buffer.from(config.WEBHOOK_SECRETS_KEY, 'base64');
    if (key.length !== 32) throw new Error('invalid configuration: WEBHOOK_SECRETS_KEY must be 32 bytes in base64');
    return key;
  }
  if (process.env.NODE_ENV === 'production') throw new Error('invalid configuration: WEBHOOK_SECRETS_KEY is required in production');
  return DEVELOPMENT_SECRETS_KEY;
}
