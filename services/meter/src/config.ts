import { baseConfigSchema, loadConfig, z } from '@fleet/service-kit';
import { TOPIC_ROOT_PATTERN, TOPIC_ROOT_RULE } from '@fleet/device-protocol';

const schema = baseConfigSchema.extend({
  HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(9104),
  DATABASE_URL: z.string().default('postgresql://postgres@127.0.0.1:5432/fleet_meter'),
  /** Topic root of meters (device protocol: `<root>/<device_id>/...`). */
  METER_TOPIC_ROOT: z.string().regex(TOPIC_ROOT_PATTERN, TOPIC_ROOT_RULE).default('meter'),
  /** Prefix of every subject this service uses (DEVICE_IN subjects and the bridge/registry requests); tests isolate with it. */
  SUBJECT_PREFIX: z.string().regex(/^([A-Za-z0-9_-]+\.)*$/).default(''),
  DEVICE_IN_STREAM: z.string().default('DEVICE_IN'),
  /** The durable consumer every replica shares. */
  METER_CONSUMER: z.string().regex(/^[A-Za-z0-9_-]+$/).default('meter-ingest'),
  INGEST_BATCH: z.coerce.number().int().min(1).max(5000).default(2000),
  INGEST_ACK_WAIT_SECONDS: z.coerce.number().int().min(1).default(60),
  /** How long a request to the bridge or the registry may take; below the gateway's bus timeout. */
  DOWNSTREAM_TIMEOUT_MS: z.coerce.number().int().positive().default(2000),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).default(10),
  /**
   * What this process does: `ingest` (the DEVICE_IN consumer: interval records, live readings,
   * acknowledgements), `query` (the partner requests: reads, live-reading and reset requests)
   * or `both` (the default). Two Deployments of one image then scale apart: ingest on its
   * consumer's lag, queries on their request rate.
   */
  METER_ROLE: z.enum(['both', 'ingest', 'query']).default('both'),
  /**
   * Optional: a read replica (one streaming replica of DATABASE_URL) for pages by start time,
   * summaries and energy. Arrival pages, requests and ingest always use DATABASE_URL.
   */
  DATABASE_READ_URL: z.string().optional(),
  /**
   * How often each replica settles live readings pending past their deadline as no_reply (and
   * writes their `meter.sample_settled` events), whether or not anyone reads them.
   */
  SAMPLE_SWEEP_INTERVAL_MS: z.coerce.number().int().min(100).default(2000),
  /**
   * V8's heap growing factor and young collection trigger, in percent (0: V8's own). A page of
   * records is written with few JavaScript objects, so the young generation fills slowly while
   * each page's buffers (about a megabyte: Postgres' text, the answer) wait for a collection;
   * with V8's own values they set off a full collection every few pages. See the service kit's
   * applyHeapSettings.
   */
  METER_HEAP_GROWING_PERCENT: z.coerce.number().int().min(0).max(1000).default(200),
  METER_MINOR_GC_TRIGGER_PERCENT: z.coerce.number().int().min(0).max(100).default(20),
});

export type MeterConfig = z.infer<typeof schema>;

export function readMeterConfig(env: Record<string, string | undefined> = process.env): MeterConfig {
  return loadConfig(schema, env);
}

/** Which parts of the meter this process runs (METER_ROLE). */
export function meterParts(config: Pick<MeterConfig, 'METER_ROLE'>): { ingest: boolean; queries: boolean } {
  return { ingest: config.METER_ROLE !== 'query', queries: config.METER_ROLE !== 'ingest' };
}

/** The DEVICE_IN filter of meter traffic. */
export const meterFilter = (config: Pick<MeterConfig, 'SUBJECT_PREFIX'>): string => `${config.SUBJECT_PREFIX}dev.in.meter.>`;
