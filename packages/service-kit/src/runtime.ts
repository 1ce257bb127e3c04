import { Bus } from './bus';
import type { BaseConfig } from './config';
import { HealthServer, type ReadinessCheck } from './health';
import { createLogger, type Logger } from './logger';
import { startProcessMetrics } from './metrics';
import { startTraceExport } from './trace';

type Closer = () => Promise<void> | void;

export interface RuntimeOptions {
  service: string;
  config: BaseConfig;
  /** Extra readiness checks beside the bus connection (database, cache, broker...). */
  readiness?: Record<string, ReadinessCheck>;
  /** How long shutdown may take before the process exits anyway. */
  shutdownGraceMs?: number;
  /** Put before every bus subject (tests that share a NATS server); see BusOptions.subjectPrefix. */
  subjectPrefix?: string;
}

/**
 * What every service's composition root starts with: a logger, the bus, the health
 * endpoints and graceful shutdown. Resources registered with onClose() are closed in
 * reverse order on SIGTERM/SIGINT, after the bus has drained in-flight requests.
 */
export class ServiceRuntime {
  private readonly intakeClosers: Closer[] = [];
  private readonly closers: Closer[] = [];
  private closing?: Promise<void>;
  healthPort = 0;

  private constructor(
    readonly service: string,
    readonly logger: Logger,
    readonly bus: Bus,
    readonly health: HealthServer,
    private readonly graceMs: number,
  ) {}

  static async start(options: RuntimeOptions): Promise<ServiceRuntime> {
    const { service, config } = options;
    const logger = createLogger(service, config.LOG_LEVEL, config.SERVICE_INSTANCE);
    // Until the runtime exists a stop signal ends the process at once (nothing is served yet):
    // in a container node is PID 1, and a signal it has no handler for is ignored there.
    const stopEarly = (signal: NodeJS.Signals) => {
      logger.info({ signal }, 'stopped while connecting to NATS');
      process.exit(0);
    };
    process.once('SIGTERM', stopEarly).once('SIGINT', stopEarly);
    startProcessMetrics({ service, instance: config.SERVICE_INSTANCE });
    const bus = await Bus.connect({ servers: config.NATS_URL, service, logger, requestTimeoutMs: config.BUS_REQUEST_TIMEOUT_MS, subjectPrefix: options.subjectPrefix });
    const health = new HealthServer({ bus: () => bus.isConnected, ...options.readiness });
    const runtime = new ServiceRuntime(service, logger, bus, health, options.shutdownGraceMs ?? 10_000);
    process.off('SIGTERM', stopEarly).off('SIGINT', stopEarly);
    runtime.closeOnStopSignals();
    // Spans go out over OTLP only when an endpoint is configured (OTEL_EXPORTER_OTLP_*).
    const stopTraceExport = await startTraceExport(service, config.SERVICE_INSTANCE ?? service);
    if (stopTraceExport) {
      logger.info('exporting traces over OTLP');
      runtime.onClose(stopTraceExport);
    }
    runtime.healthPort = await health.listen(config.HEALTH_PORT);
    return runtime;
  }

  /**
   * Registers something to close on shutdown. 'intake' closers (servers that accept work)
   * run first, then the bus drains in-flight requests, then 'resource' closers (databases,
   * caches) in reverse order of registration.
   */
  onClose(closer: Closer, phase: 'intake' | 'resource' = 'resource'): void {
    (phase === 'intake' ? this.intakeClosers : this.closers).push(closer);
  }

  /** Marks the service ready. */
  ready(details: Record<string, unknown> = {}): void {
    this.health.markReady();
    this.logger.info({ health_port: this.healthPort, ...details }, 'ready');
  }

  /**
   * SIGTERM and SIGINT close the service and exit, from the moment the runtime exists: also
   * while the service is still starting (creating or migrating its database, waiting for the
   * broker), where what it has opened so far is closed.
   */
  private closeOnStopSignals(): void {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.once(signal, () => {
        this.logger.info({ signal }, 'shutting down');
        void this.close().then(() => process.exit(0));
      });
    }
  }

  close(): Promise<void> {
    this.closing ??= this.runClosers();
    return this.closing;
  }

  private async runClosers(): Promise<void> {
    this.health.markReady(false);
    const timer = setTimeout(() => {
      this.logger.error('shutdown grace period exceeded; exiting');
      process.exit(1);
    }, this.graceMs);
    timer.unref();
    const steps: Closer[] = [
      ...[...this.intakeClosers].reverse(),
      () => this.bus.drain(),
      ...[...this.closers].reverse(),
      () => this.health.close(),
    ];
    for (const step of steps) {
      try {
        await step();
      } catch (err) {
        this.logger.warn({ err }, 'error while closing');
      }
    }
    clearTimeout(timer);
  }
}
