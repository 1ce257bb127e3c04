import { CAPS } from './caps';
import { GRAMMAR, WireError, type AnimatedEffect, type Color, type LightEffect, type Overlay } from './grammar';

/**
 * The API's light effect types (spec, "Alert signal"): fields in seconds and ratios, colors as
 * {r,g,b}. Converted to wire payloads with every field checked; nothing is ever rounded.
 */
export interface Rgb {
  r: number;
  g: number;
  b: number;
}

export type ApiEffect =
  | { type: 'Solid'; color: Rgb }
  | { type: 'Pulse'; color: Rgb; period_s: number }
  | { type: 'PulseThenSolid'; pulse_time_s: number; pulse_color: Rgb; pulse_period_s: number; solid_color: Rgb; repeat_s: number }
  | { type: 'Chase'; color: Rgb; period_s: number; width: number }
  | { type: 'ChaseThenSolid'; chase_time_s: number; chase_color: Rgb; chase_period_s: number; chase_width: number; solid_color: Rgb; repeat_s: number }
  | { type: 'Toggle'; color1: Rgb; color2: Rgb; period_s: number; duty_ratio: number }
  | {
      type: 'ToggleThenSolid';
      toggle_time_s: number;
      toggle_color1: Rgb;
      toggle_color2: Rgb;
      toggle_period_s: number;
      toggle_duty_ratio: number;
      solid_color: Rgb;
      repeat_s: number;
    }
  | { type: 'BluChase'; period_s: number; brightness_per: number };

export type ApiEffectType = ApiEffect['type'];

/** Every field of each type (all required, no others). */
export const API_EFFECT_FIELDS: Record<ApiEffectType, readonly string[]> = {
  Solid: ['color'],
  Pulse: ['color', 'period_s'],
  PulseThenSolid: ['pulse_time_s', 'pulse_color', 'pulse_period_s', 'solid_color', 'repeat_s'],
  Chase: ['color', 'period_s', 'width'],
  ChaseThenSolid: ['chase_time_s', 'chase_color', 'chase_period_s', 'chase_width', 'solid_color', 'repeat_s'],
  Toggle: ['color1', 'color2', 'period_s', 'duty_ratio'],
  ToggleThenSolid: ['toggle_time_s', 'toggle_color1', 'toggle_color2', 'toggle_period_s', 'toggle_duty_ratio', 'solid_color', 'repeat_s'],
  BluChase: ['period_s', 'brightness_per'],
};

/** Ranges of the API fields (spec, "Field ranges"), in the API's units. */
export const API_RANGES = {
  period_s: { min: 0.1, max: 9.999 },
  animation_s: { min: 0.1, max: 99.999 },
  width: GRAMMAR.width,
  duty_ratio: { min: 0.01, max: 0.99 },
  repeat_s: GRAMMAR.repeat_s,
  brightness_per: GRAMMAR.brightness_pct,
  color_component: { min: 0, max: 255 },
  /** Overlay timing of effects on light2/light3, caps included. */
  duration_s: { min: GRAMMAR.overlay_duration_ms.min / 1000, max: CAPS.max_overlay_duration_ms / 1000 },
  interval_s: { min: CAPS.min_overlay_interval_ms / 1000, max: GRAMMAR.overlay_interval_ms.max / 1000 },
} as const;

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const join = (prefix: string, field: string): string => (prefix ? `${prefix}.${field}` : field);

function number(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new WireError(field, `${field} must be a number`);
  return value;
}

/** A whole number within the range. */
export function wholeIn(value: unknown, field: string, range: { min: number; max: number }): number {
  const n = number(value, field);
  if (!Number.isInteger(n) || n < range.min || n > range.max) {
    throw new WireError(field, `${field} must be a whole number from ${range.min} to ${range.max}, got ${n}`);
  }
  return n;
}

/** A number within the range that is an exact multiple of `1/scale` (never rounded); returns it times `scale`. */
export function scaledIn(value: unknown, field: string, range: { min: number; max: number }, scale: number, unit: string): number {
  const n = number(value, field);
  if (n < range.min || n > range.max) throw new WireError(field, `${field} must be from ${range.min} to ${range.max}${unit}, got ${n}`);
  const scaled = n * scale;
  const whole = Math.round(scaled);
  if (Math.abs(scaled - whole) > 1e-6) {
    throw new WireError(field, `${field} must be a multiple of ${1 / scale}${unit} (the device's resolution), got ${n}`);
  }
  return whole;
}

const secondsToMs = (value: unknown, field: string, range: { min: number; max: number }): number => scaledIn(value, field, range, 1000, ' s');

export function rgbToColor(value: unknown, field: string): Color {
  if (!isObject(value)) throw new WireError(field, `${field} must be a color {r, g, b}`);
  for (const key of Object.keys(value)) if (!['r', 'g', 'b'].includes(key)) throw new WireError(join(field, key), `${join(field, key)} is not a color component`);
  const parts = (['r', 'g', 'b'] as const).map((c) => {
    if (!(c in value)) throw new WireError(join(field, c), `${join(field, c)} is required`);
    return wholeIn(value[c], join(field, c), API_RANGES.color_component);
  });
  return parts.map((p) => p.toString(16).padStart(2, '0').toUpperCase()).join('');
}

export function colorToRgb(color: Color): Rgb {
  return { r: parseInt(color.slice(0, 2), 16), g: parseInt(color.slice(2, 4), 16), b: parseInt(color.slice(4, 6), 16) };
}

function checkRepeat(repeat_s: number, animationMs: number, field: string, animationField: string): void {
  if (repeat_s !== 0 && repeat_s * 1000 <= animationMs) {
    throw new WireError(field, `${field} must be 0 (play once) or longer than ${animationField} (${animationMs / 1000} s), got ${repeat_s}`);
  }
}

/**
 * Converts an API effect (as parsed from JSON: anything) to a wire effect. Every field is
 * required and checked against the spec's ranges and the availability caps; errors name the
 * field as `<prefix>.<field>`.
 */
export function apiEffectToWire(input: unknown, prefix = ''): AnimatedEffect {
  if (!isObject(input)) throw new WireError(prefix || 'effect', `${prefix || 'effect'} must be an object with a type`);
  const type = input.type;
  const typeField = join(prefix, 'type');
  if (typeof type !== 'string' || !Object.prototype.hasOwnProperty.call(API_EFFECT_FIELDS, type)) {
    throw new WireError(typeField, `${typeField} must be one of ${Object.keys(API_EFFECT_FIELDS).join(', ')}`);
  }
  const fields = API_EFFECT_FIELDS[type as ApiEffectType];
  for (const key of Object.keys(input)) {
    if (key !== 'type' && !fields.includes(key)) throw new WireError(join(prefix, key), `${join(prefix, key)} is not a field of ${type}`);
  }
  for (const key of fields) if (!(key in input)) throw new WireError(join(prefix, key), `${join(prefix, key)} is required for ${type}`);
  const f = (name: string): [unknown, string] => [input[name], join(prefix, name)];
  const color = (name: string) => rgbToColor(...f(name));
  const period = (name: string) => secondsToMs(...f(name), API_RANGES.period_s);
  const animation = (name: string) => secondsToMs(...f(name), API_RANGES.animation_s);
  const width = (name: string) => wholeIn(...f(name), API_RANGES.width);
  const duty = (name: string) => scaledIn(...f(name), API_RANGES.duty_ratio, 100, '');
  const repeat = (animationMs: number, animationField: string) => {
    const r = wholeIn(...f('repeat_s'), API_RANGES.repeat_s);
    checkRepeat(r, animationMs, join(prefix, 'repeat_s'), join(prefix, animationField));
    return r;
  };
  switch (type as ApiEffectType) {
    case 'Solid':
      return { kind: 'solid', color: color('color') };
    case 'Pulse':
      return { kind: 'pulse', color: color('color'), period_ms: period('period_s') };
    case 'Chase':
      return { kind: 'chase', color: color('color'), period_ms: period('period_s'), width: width('width') };
    case 'Toggle':
      return { kind: 'toggle', color1: color('color1'), color2: color('color2'), period_ms: period('period_s'), duty_pct: duty('duty_ratio') };
    case 'BluChase':
      return { kind: 'bluchase', period_ms: period('period_s'), brightness_pct: wholeIn(...f('brightness_per'), API_RANGES.brightness_per) };
    case 'PulseThenSolid': {
      const pulse_ms = animation('pulse_time_s');
      const pulse_color = color('pulse_color');
      const period_ms = period('pulse_period_s');
      const solid_color = color('solid_color');
      return { kind: 'pulsesolid', pulse_ms, pulse_color, period_ms, solid_color, repeat_s: repeat(pulse_ms, 'pulse_time_s') };
    }
    case 'ChaseThenSolid': {
      const chase_ms = animation('chase_time_s');
      const chase_color = color('chase_color');
      const period_ms = period('chase_period_s');
      const w = width('chase_width');
      const solid_color = color('solid_color');
      return { kind: 'chasesolid', chase_ms, chase_color, period_ms, width: w, solid_color, repeat_s: repeat(chase_ms, 'chase_time_s') };
    }
    case 'ToggleThenSolid': {
      const toggle_ms = animation('toggle_time_s');
      const color1 = color('toggle_color1');
      const color2 = color('toggle_color2');
      const period_ms = period('toggle_period_s');
      const duty_pct = duty('toggle_duty_ratio');
      const solid_color = color('solid_color');
      return { kind: 'togglesolid', toggle_ms, color1, color2, period_ms, duty_pct, solid_color, repeat_s: repeat(toggle_ms, 'toggle_time_s') };
    }
  }
}

/**
 * Wraps an effect as a repeating overlay for light2/light3 from seconds: `duration_s` (how long
 * each occurrence lasts) and `interval_s` (how often it repeats; 0 = once), caps included.
 */
export function overlayOf(effect: LightEffect, timing: { duration_s: unknown; interval_s: unknown }, prefix = ''): Overlay {
  if (effect.kind === 'off') throw new WireError(join(prefix, 'effect'), "an overlay plays an effect; 'off' cannot be one");
  const duration_ms = secondsToMs(timing.duration_s, join(prefix, 'duration_s'), API_RANGES.duration_s);
  const intervalField = join(prefix, 'interval_s');
  const interval = number(timing.interval_s, intervalField);
  const interval_ms = interval === 0 ? 0 : scaledIn(interval, intervalField, API_RANGES.interval_s, 1000, ' s (or 0 for once)');
  return { kind: 'overlay', effect, duration_ms, interval_ms };
}
