/**
 * The rule metrics of one sensor, computed over its readings (definitions in the service
 * README), and running a profile's rules over them. Pure.
 */
import type { Level } from './levels';

export const METRICS = [
  'reading_count',
  'newest_age_secs',
  'latest_breach',
  'consecutive_breaches',
  'breaches_in_window',
  'latest_temp_c',
  'latest_humidity',
  'min_temp_c',
  'max_temp_c',
] as const;
export type Metric = (typeof METRICS)[number];

/** Metrics whose value is a boolean (compared with == and != only); every other one is a number. */
export const BOOLEAN_METRICS: readonly Metric[] = ['latest_breach'];

export const OPERATORS = ['==', '!=', '<', '<=', '>', '>=', 'is_null', 'not_null'] as const;
export type Operator = (typeof OPERATORS)[number];
export const NULL_OPERATORS: readonly Operator[] = ['is_null', 'not_null'];

export type MetricValues = Record<Metric, number | boolean | null>;

export interface Condition {
  metric: Metric;
  op: Operator;
  value?: number | boolean;
}

export interface Rule {
  all: Condition[];
  level: Level;
}

/** A condition on a metric that is null holds only for is_null (a missing value never breaches or clears). */
export function holds(c: Condition, metrics: MetricValues): boolean {
  const v = metrics[c.metric];
  if (c.op === 'is_null') return v === null;
  if (c.op === 'not_null') return v !== null;
  if (v === null || c.value === undefined) return false;
  switch (c.op) {
    case '==':
      return v === c.value;
    case '!=':
      return v !== c.value;
    case '<':
      return v < c.value;
    case '<=':
      return v <= c.value;
    case '>':
      return v > c.value;
    case '>=':
      return v >= c.value;
  }
}

/** The first rule whose conditions all hold gives the level; none does: the profile's default. */
export function evaluateRules(rules: readonly Rule[], defaultLevel: Level, metrics: MetricValues): Level {
  return rules.find((rule) => rule.all.every((c) => holds(c, metrics)))?.level ?? defaultLevel;
}

/** A sensor's readings as the evaluation summarizes them (one row of the metrics query). */
export interface ReadingSummary {
  /** Readings whose time lies in the window. */
  count: number;
  breaches: number;
  /** Newest readings in a row (within the window) that report a breach. */
  consecutiveBreaches: number;
  minTempC: number | null;
  maxTempC: number | null;
  /** The newest reading ever kept, whether or not in the window. */
  newest: { at: Date; breach: boolean; tempC: number | null; humidity: number | null } | null;
}

export function metricsOf(summary: ReadingSummary, now: Date): MetricValues {
  const newest = summary.newest;
  return {
    reading_count: summary.count,
    newest_age_secs: newest ? Math.max(0, Math.floor((now.getTime() - newest.at.getTime()) / 1000)) : null,
    latest_breach: newest ? newest.breach : null,
    consecutive_breaches: summary.consecutiveBreaches,
    breaches_in_window: summary.breaches,
    latest_temp_c: newest ? newest.tempC : null,
    latest_humidity: newest ? newest.humidity : null,
    min_temp_c: summary.minTempC,
    max_temp_c: summary.maxTempC,
  };
}

/**
 * A sensor as an alert.level_changed event reports it: the level the cycle gave it, when its
 * newest reading was taken (`latest_at`, null when it has none) and the metrics the rules ran on.
 */
export function evaluatedSensor(
  sensor: { tdlId: string; profileId: number | null; newest: ReadingSummary['newest'] },
  level: Level,
  metrics: MetricValues,
): { tdl_id: string } & Record<string, unknown> {
  return { tdl_id: sensor.tdlId, profile_id: sensor.profileId, level, latest_at: sensor.newest ? sensor.newest.at.toISOString() : null, ...metrics };
}
