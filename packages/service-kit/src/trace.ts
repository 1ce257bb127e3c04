import { AsyncLocalStorage } from 'node:async_hooks';
import { randomFillSync } from 'node:crypto';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace as otel, TraceFlags, type Attributes, type Tracer } from '@opentelemetry/api';

/**
 * Trace context across the fleet (W3C Trace Context): the gateway takes a partner's
 * `traceparent` or starts a trace, the bus carries it in a `traceparent` NATS header on every
 * request (and on JetStream messages published while handling one), and every log line written
 * while handling a request carries its `trace_id` and `request_id` (logger.ts reads them from
 * here). Spans are exported over OTLP only when OTEL_EXPORTER_OTLP_ENDPOINT (or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; otherwise no span object is ever made, only the
 * ids.
 */
export interface TraceContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
}

/** What a unit of work carries: its trace context and the request it serves. */
export interface WorkContext {
  trace: TraceContext;
  requestId?: string;
}

/**
 * FLEET_TELEMETRY=off turns trace context and the request metrics off (process metrics stay):
 * the benchmarks measure what they cost with it. On by default.
 */
export const telemetryOn = process.env.FLEET_TELEMETRY !== 'off';

export const TRACEPARENT_HEADER = 'traceparent';
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** A valid version-00 `traceparent`, or undefined (an invalid one starts a new trace). */
export function parseTraceparent(value: string | null | undefined): TraceContext | undefined {
  const m = value ? TRACEPARENT.exec(value.trim()) : null;
  if (!m || m[1] === ZERO_TRACE || m[2] === ZERO_SPAN) return undefined;
  return { traceId: m[1] as string, spanId: m[2] as string, sampled: (parseInt(m[3] as string, 16) & 1) === 1 };
}

export function formatTraceparent(t: TraceContext): string {
  return `00-${t.traceId}-${t.spanId}-${t.sampled ? '01' : '00'}`;
}

// Random ids from a pooled buffer: one randomFillSync per few hundred requests.
const pool = Buffer.alloc(4096);
let taken = pool.length;
function randomHex(bytes: number): string {
  for (;;) {
    if (taken + bytes > pool.length) {
      randomFillSync(pool);
      taken = 0;
    }
    const hex = pool.toString('hex', taken, taken + bytes);
    taken += bytes;
    // An all-zero id is invalid (and has a chance of 2^-64 at most).
    if (hex !== ZERO_TRACE && hex !== ZERO_SPAN) return hex;
  }
}

const storage = new AsyncLocalStorage<WorkContext>();

/** The work under way in this async context, if any. */
export function currentWork(): WorkContext | undefined {
  return storage.getStore();
}

/** Runs `fn` (and everything it starts) as part of `work` (just `fn` with telemetry off). */
export function withWork<T>(work: WorkContext, fn: () => T): T {
  return telemetryOn ? storage.run(work, fn) : fn();
}

/** A span of the trace: the context to carry on, and its end. */
export interface Hop {
  context: TraceContext;
  /** Whether the span is exported: build its name and attributes only then. */
  recording: boolean;
  end(outcome?: { error?: string; name?: string; attributes?: Attributes }): void;
}

/**
 * The ids of a span that is not exported, made when first read: work that never logs, calls
 * another service or publishes (a request the gateway answers itself) never pays for them.
 */
class IdsOnDemand implements TraceContext {
  private trace?: string;
  private span?: string;

  constructor(private readonly parent: TraceContext | undefined) {}

  get traceId(): string {
    return (this.trace ??= this.parent?.traceId ?? randomHex(16));
  }

  get spanId(): string {
    return (this.span ??= randomHex(8));
  }

  get sampled(): boolean {
    return this.parent?.sampled ?? true;
  }

  toJSON(): { traceId: string; spanId: string; sampled: boolean } {
    return { traceId: this.traceId, spanId: this.spanId, sampled: this.sampled };
  }
}

let tracer: Tracer | undefined;
const NO_END = (): void => undefined;
const KINDS = { server: SpanKind.SERVER, client: SpanKind.CLIENT, producer: SpanKind.PRODUCER, consumer: SpanKind.CONSUMER } as const;

/** Starts a span under `parent` (a new trace without one). */
export function startHop(name: string, kind: keyof typeof KINDS, parent?: TraceContext, attributes?: Attributes): Hop {
  if (!tracer) return { context: new IdsOnDemand(parent), recording: false, end: NO_END };
  const parentContext = parent
    ? otel.setSpanContext(ROOT_CONTEXT, { traceId: parent.traceId, spanId: parent.spanId, traceFlags: parent.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true })
    : ROOT_CONTEXT;
  const span = tracer.startSpan(name, { kind: KINDS[kind], ...(attributes ? { attributes } : {}) }, parentContext);
  const sc = span.spanContext();
  return {
    context: { traceId: sc.traceId, spanId: sc.spanId, sampled: (sc.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED },
    recording: true,
    end: (outcome = {}) => {
      if (outcome.name) span.updateName(outcome.name);
      if (outcome.attributes) span.setAttributes(outcome.attributes);
      if (outcome.error) span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error });
      span.end();
    },
  };
}

/** The OTLP/HTTP traces endpoint from the standard variables, or undefined: export off. */
export function traceExportEndpoint(env: Record<string, string | undefined> = process.env): string | undefined {
  if (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (env.OTEL_EXPORTER_OTLP_ENDPOINT) return `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`;
  return undefined;
}

/**
 * Starts exporting spans over OTLP/HTTP when an endpoint is configured (the SDK is loaded only
 * then); resolves to a flush-and-stop function, or undefined when export is off.
 */
export async function startTraceExport(service: string, instance: string, env: Record<string, string | undefined> = process.env): Promise<(() => Promise<void>) | undefined> {
  const url = traceExportEndpoint(env);
  if (!url) return undefined;
  const [{ TracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ]);
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': service, 'service.instance.id': instance }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url }), scheduledDelayMillis: 1000 })],
  });
  tracer = provider.getTracer('fleet');
  return async () => {
    tracer = undefined;
    await provider.shutdown();
  };
}
