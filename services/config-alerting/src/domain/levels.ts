/**
 * Alert levels, rule metrics and operators (spec, "Alert profile"), and how a light's level
 * follows from its sensors'. Pure.
 */

/** Levels a rule or a profile's default may name; INSUFFICENT_DATA is spelled as the spec spells it. */
export const LEVELS = ['CLEAR', 'ADVISORY', 'WARNING', 'NO_SENSORS', 'INSUFFICENT_DATA', 'STALE_DATA', 'UNKNOWN'] as const;
export type Level = (typeof LEVELS)[number];

/** A signal's entries: the three data levels and NO_DATA for every level that says there is no data. */
export const SIGNAL_KEYS = ['CLEAR', 'ADVISORY', 'WARNING', 'NO_DATA'] as const;
export type SignalKey = (typeof SIGNAL_KEYS)[number];

export const isLevel = (v: unknown): v is Level => typeof v === 'string' && (LEVELS as readonly string[]).includes(v);

/** The signal entry a level shows. */
export function signalKeyOf(level: Level): SignalKey {
  return level === 'CLEAR' || level === 'ADVISORY' || level === 'WARNING' ? level : 'NO_DATA';
}

/**
 * How a light's level follows from its sensors' levels: the most severe wins, in this order,
 * so a breach on one sensor is never hidden by another's silence, and a silent sensor is never
 * hidden by another's CLEAR. A light without sensors is NO_SENSORS.
 */
export const SEVERITY: readonly Level[] = ['WARNING', 'ADVISORY', 'STALE_DATA', 'INSUFFICENT_DATA', 'UNKNOWN', 'NO_SENSORS', 'CLEAR'];

export function deviceLevel(sensorLevels: readonly Level[]): Level {
  if (sensorLevels.length === 0) return 'NO_SENSORS';
  return SEVERITY.find((level) => sensorLevels.includes(level)) ?? 'UNKNOWN';
}
