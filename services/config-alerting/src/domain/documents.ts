/**
 * Checking what partners send for profiles and signals: each refusal names the rule or entry
 * and the field (`rules[2].all[0].op`, `entries.WARNING.light.period_s`). Pure; throws
 * DocumentError, which handlers answer as 400 validation_error.
 */
import { apiEffectToWire, encodeEffect, WireError } from '@fleet/light-wire';
import { isLevel, LEVELS, SIGNAL_KEYS, type Level, type SignalKey } from './levels';
import { BOOLEAN_METRICS, METRICS, NULL_OPERATORS, OPERATORS, type Condition, type Metric, type Operator, type Rule } from './metrics';

export const MAX_RULES = 20;
export const MAX_CONDITIONS = 8;
export const NAME_MAX = 120;
export const DESCRIPTION_MAX = 1000;

export class DocumentError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function onlyKeys(value: Record<string, unknown>, allowed: readonly string[], at: string): void {
  const extra = Object.keys(value).find((k) => !allowed.includes(k));
  if (extra !== undefined) throw new DocumentError(`${at}.${extra}`, `${at}.${extra} is not a field of ${at.replace(/\[\d+\]/g, '[]')} (allowed: ${allowed.join(', ')})`);
}

export function checkName(value: unknown, field = 'name'): string {
  if (typeof value !== 'string' || value.trim().length === 0 || [...value].length > NAME_MAX) {
    throw new DocumentError(field, `${field} must be a string of 1 to ${NAME_MAX} characters`);
  }
  return value;
}

export function checkDescription(value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== 'string' || [...value].length > DESCRIPTION_MAX) {
    throw new DocumentError('description', `description must be a string of at most ${DESCRIPTION_MAX} characters, or null`);
  }
  return value;
}

export function checkLevel(value: unknown, field: string): Level {
  if (!isLevel(value)) throw new DocumentError(field, `${field} must be one of ${LEVELS.join(', ')}`);
  return value;
}

function checkCondition(value: unknown, at: string): Condition {
  if (!isObject(value)) throw new DocumentError(at, `${at} must be an object {metric, op, value}`);
  onlyKeys(value, ['metric', 'op', 'value'], at);
  const { metric, op } = value;
  if (typeof metric !== 'string' || !(METRICS as readonly string[]).includes(metric)) {
    throw new DocumentError(`${at}.metric`, `${at}.metric must be one of ${METRICS.join(', ')}`);
  }
  if (typeof op !== 'string' || !(OPERATORS as readonly string[]).includes(op)) {
    throw new DocumentError(`${at}.op`, `${at}.op must be one of ${OPERATORS.join(', ')}`);
  }
  const m = metric as Metric;
  const o = op as Operator;
  // A condition is {metric, op, value}: with is_null and not_null the value means nothing and is dropped.
  if (NULL_OPERATORS.includes(o)) return { metric: m, op: o };
  if (BOOLEAN_METRICS.includes(m)) {
    if (o !== '==' && o !== '!=') throw new DocumentError(`${at}.op`, `${at}.op must be ==, !=, is_null or not_null for ${m} (a boolean)`);
    if (typeof value.value !== 'boolean') throw new DocumentError(`${at}.value`, `${at}.value must be true or false for ${m}`);
    return { metric: m, op: o, value: value.value };
  }
  if (typeof value.value !== 'number' || !Number.isFinite(value.value)) throw new DocumentError(`${at}.value`, `${at}.value must be a number for ${m}`);
  return { metric: m, op: o, value: value.value };
}

/** The ordered rules of a profile: at most 20, each with up to 8 conditions that must all hold (none: it always holds). */
export function checkRules(value: unknown): Rule[] {
  if (!Array.isArray(value)) throw new DocumentError('rules', 'rules must be an array of {all, level}');
  if (value.length > MAX_RULES) throw new DocumentError('rules', `rules may hold at most ${MAX_RULES} rules, got ${value.length}`);
  return value.map((rule, k) => {
    const at = `rules[${k}]`;
    if (!isObject(rule)) throw new DocumentError(at, `${at} must be an object {all, level}`);
    onlyKeys(rule, ['all', 'level'], at);
    if (!Array.isArray(rule.all) || rule.all.length > MAX_CONDITIONS) {
      throw new DocumentError(`${at}.all`, `${at}.all must be an array of at most ${MAX_CONDITIONS} conditions`);
    }
    const all = rule.all.map((c, j) => checkCondition(c, `${at}.all[${j}]`));
    return { all, level: checkLevel(rule.level, `${at}.level`) };
  });
}

export interface CheckedEntries {
  /** As sent (the API's form, returned on reads). */
  entries: Record<SignalKey, { light: Record<string, unknown> }>;
  /** Each entry as the light1 wire payload the device runs. */
  payloads: Record<SignalKey, string>;
}

/**
 * A signal's entries: exactly CLEAR, ADVISORY, WARNING and NO_DATA, each `{light: effect}`,
 * every effect checked as the device would run it (ranges, never rounded, availability caps).
 */
export function checkEntries(value: unknown): CheckedEntries {
  if (!isObject(value)) throw new DocumentError('entries', `entries must be an object with ${SIGNAL_KEYS.join(', ')}`);
  onlyKeys(value, SIGNAL_KEYS, 'entries');
  const entries = {} as CheckedEntries['entries'];
  const payloads = {} as CheckedEntries['payloads'];
  for (const key of SIGNAL_KEYS) {
    const at = `entries.${key}`;
    const entry = value[key];
    if (entry === undefined) throw new DocumentError(at, `${at} is required`);
    if (!isObject(entry)) throw new DocumentError(at, `${at} must be an object {light}`);
    onlyKeys(entry, ['light'], at);
    if (entry.light === undefined) throw new DocumentError(`${at}.light`, `${at}.light is required`);
    try {
      payloads[key] = encodeEffect(apiEffectToWire(entry.light, `${at}.light`));
    } catch (err) {
      if (err instanceof WireError) throw new DocumentError(err.field, err.message);
      throw err;
    }
    entries[key] = { light: entry.light as Record<string, unknown> };
  }
  return { entries, payloads };
}

/** The wire payloads of entries already stored (they were checked when written). */
export function payloadsOf(entries: unknown): Record<SignalKey, string> {
  return checkEntries(entries).payloads;
}
