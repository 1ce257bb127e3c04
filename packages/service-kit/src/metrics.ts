import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { telemetryOn } from './trace';

export { Gauge } from 'prom-client';
export type { Counter, Histogram } from 'prom-client';

/**
 * The process's Prometheus metrics, served at `/metrics` on the health port (HealthServer).
 * One registry per process; every series carries the `service` and `instance` labels set by
 * ServiceRuntime. Labels are bounded: subjects, route templates, codes and classes, never a
 * device id or a request's own values.
 */
export const metricsRegistry = new Registry();

let defaultsCollected = false;

/** Labels every series of this process and starts the process and event-loop metrics (once). */
export function startProcessMetrics(labels: { service: string; instance?: string }): void {
  metricsRegistry.setDefaultLabels({ service: labels.service, instance: labels.instance ?? labels.service });
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: metricsRegistry, eventLoopMonitoringPrecision: 10 });
}

/** Latency buckets (seconds) for requests that take from a fraction of a millisecond to seconds. */
export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Counters, gauges and histograms registered once per name (modules may ask more than once). */
function once<T>(name: string, make: () => T): T {
  return (metricsRegistry.getSingleMetric(name) as T | undefined) ?? make();
}

export const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> =>
  once(name, () => new Counter({ name, help, labelNames, registers: [metricsRegistry] }));

export const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[]): Gauge<L> =>
  once(name, () => new Gauge({ name, help, labelNames, registers: [metricsRegistry] }));

export const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[], buckets = LATENCY_BUCKETS): Histogram<L> =>
  once(name, () => new Histogram({ name, help, labelNames, buckets, registers: [metricsRegistry] }));

/**
 * A counter and a histogram observed together on a hot path, their label-bound children kept
 * per label set: prom-client otherwise hashes the labels on every call.
 */
export class CountedTimer<C extends string, H extends string> {
  private readonly children = new Map<string, { count: { inc(): void }; time: { observe(v: number): void } }>();

  constructor(
    private readonly count: Counter<C>,
    private readonly time: Histogram<H>,
  ) {}

  /**
   * Counts one event under `countLabels` and times it under `timeLabels` (seconds); `key` names
   * the label set (e.g. the values joined), so a known one costs one map lookup.
   */
  record(key: string, countLabels: Record<C, string>, timeLabels: Record<H, string>, seconds: number): void {
    if (!telemetryOn) return;
    let child = this.children.get(key);
    if (!child) {
      child = { count: this.count.labels(countLabels), time: this.time.labels(timeLabels) };
      this.children.set(key, child);
    }
    child.count.inc();
    child.time.observe(seconds);
  }
}
