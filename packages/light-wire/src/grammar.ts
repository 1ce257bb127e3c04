/**
 * The light wire grammar of device protocol v1 (`cmd/<channel>` and `state/<channel>`):
 * a strict parser, the matching encoder, and the grammar bounds, which are always enforced.
 */

export const LIGHT_CHANNELS = ['light1', 'light2', 'light3', 'sound', 'contact'] as const;
export type LightChannel = (typeof LIGHT_CHANNELS)[number];
export const OVERLAY_CHANNELS: readonly LightChannel[] = ['light2', 'light3'];

/** A payload or value that breaks the grammar; `field` names what is wrong. */
export class WireError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'WireError';
  }
}

/** An inclusive range of whole numbers. */
export interface Bound {
  min: number;
  max: number;
}

/** Grammar bounds, always enforced (device-protocol.md, "Light wire payloads"). */
export const GRAMMAR = {
  period_ms: { min: 20, max: 9999 },
  animation_ms: { min: 100, max: 99999 },
  repeat_s: { min: 0, max: 999999 },
  width: { min: 1, max: 12 },
  duty_pct: { min: 1, max: 99 },
  brightness_pct: { min: 0, max: 99 },
  volume_pct: { min: 0, max: 100 },
  /** Platform choice (the protocol leaves it open): how many times a sound plays. */
  count: { min: 1, max: 100 },
  overlay_duration_ms: { min: 100, max: 3_600_000 },
  /** 0 (play once) or this range. */
  overlay_interval_ms: { min: 1000, max: 86_400_000 },
  contact_pulse_ms: { min: 50, max: 60_000 },
} as const satisfies Record<string, Bound>;

/** Platform choice: a sound file name is 1–64 letters, digits, `.`, `_` or `-` (no `,`). */
export const SOUND_FILE_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** `RRGGBB`, upper case once parsed or encoded. */
export type Color = string;

export type LightEffect =
  | { kind: 'off' }
  | { kind: 'solid'; color: Color }
  | { kind: 'pulse'; color: Color; period_ms: number }
  | { kind: 'chase'; color: Color; period_ms: number; width: number }
  | { kind: 'toggle'; color1: Color; color2: Color; period_ms: number; duty_pct: number }
  | { kind: 'bluchase'; period_ms: number; brightness_pct: number }
  | { kind: 'pulsesolid'; pulse_ms: number; pulse_color: Color; period_ms: number; solid_color: Color; repeat_s: number }
  | { kind: 'chasesolid'; chase_ms: number; chase_color: Color; period_ms: number; width: number; solid_color: Color; repeat_s: number }
  | {
      kind: 'togglesolid';
      toggle_ms: number;
      color1: Color;
      color2: Color;
      period_ms: number;
      duty_pct: number;
      solid_color: Color;
      repeat_s: number;
    };

/** An animated effect (anything but `off`): what an overlay can play. */
export type AnimatedEffect = Exclude<LightEffect, { kind: 'off' }>;

export interface Overlay {
  kind: 'overlay';
  effect: AnimatedEffect;
  duration_ms: number;
  /** 0 = play once. */
  interval_ms: number;
}

export type LightPayload = LightEffect | Overlay;
export type SoundPayload = { kind: 'off' } | { kind: 'stop' } | { kind: 'play'; file: string; volume_pct: number; count?: number };
export type ContactPayload = { kind: 'off' } | { kind: 'on' } | { kind: 'pulse'; pulse_ms: number };

export type WirePayload =
  | { channel: 'light1'; value: LightEffect }
  | { channel: 'light2' | 'light3'; value: LightPayload }
  | { channel: 'sound'; value: SoundPayload }
  | { channel: 'contact'; value: ContactPayload };

export function isChannel(value: unknown): value is LightChannel {
  return typeof value === 'string' && (LIGHT_CHANNELS as readonly string[]).includes(value);
}

/** Arguments each effect keyword takes, in wire order, with their kind. */
type ArgKind = 'color' | 'period_ms' | 'animation_ms' | 'repeat_s' | 'width' | 'duty_pct' | 'brightness_pct';
const EFFECT_ARGS: Record<AnimatedEffect['kind'], ReadonlyArray<readonly [string, ArgKind]>> = {
  solid: [['color', 'color']],
  pulse: [
    ['color', 'color'],
    ['period_ms', 'period_ms'],
  ],
  chase: [
    ['color', 'color'],
    ['period_ms', 'period_ms'],
    ['width', 'width'],
  ],
  toggle: [
    ['color1', 'color'],
    ['color2', 'color'],
    ['period_ms', 'period_ms'],
    ['duty_pct', 'duty_pct'],
  ],
  bluchase: [
    ['period_ms', 'period_ms'],
    ['brightness_pct', 'brightness_pct'],
  ],
  pulsesolid: [
    ['pulse_ms', 'animation_ms'],
    ['pulse_color', 'color'],
    ['period_ms', 'period_ms'],
    ['solid_color', 'color'],
    ['repeat_s', 'repeat_s'],
  ],
  chasesolid: [
    ['chase_ms', 'animation_ms'],
    ['chase_color', 'color'],
    ['period_ms', 'period_ms'],
    ['width', 'width'],
    ['solid_color', 'color'],
    ['repeat_s', 'repeat_s'],
  ],
  togglesolid: [
    ['toggle_ms', 'animation_ms'],
    ['color1', 'color'],
    ['color2', 'color'],
    ['period_ms', 'period_ms'],
    ['duty_pct', 'duty_pct'],
    ['solid_color', 'color'],
    ['repeat_s', 'repeat_s'],
  ],
};

/** The animation time field of a "then solid" effect. */
export const ANIMATION_FIELD = { pulsesolid: 'pulse_ms', chasesolid: 'chase_ms', togglesolid: 'toggle_ms' } as const;

const WHOLE = /^(0|[1-9][0-9]{0,9})$/;
const COLOR = /^[0-9A-Fa-f]{6}$/;

/** A whole number written canonically (no sign, no leading zeros), within the bound. */
export function parseWhole(text: string, field: string, bound: Bound): number {
  if (!WHOLE.test(text)) throw new WireError(field, `${field} must be a whole number, got '${text}'`);
  const n = Number(text);
  checkRange(n, field, bound);
  return n;
}

export function checkRange(n: number, field: string, bound: Bound, unit = ''): void {
  if (!Number.isInteger(n) || n < bound.min || n > bound.max) {
    throw new WireError(field, `${field} must be a whole number from ${bound.min} to ${bound.max}${unit}, got ${n}`);
  }
}

export function parseColor(text: string, field: string): Color {
  if (!COLOR.test(text)) throw new WireError(field, `${field} must be a color RRGGBB (6 hexadecimal digits), got '${text}'`);
  return text.toUpperCase();
}

function parseArg(text: string, field: string, kind: ArgKind): string | number {
  if (kind === 'color') return parseColor(text, field);
  return parseWhole(text, field, GRAMMAR[kind]);
}

/** Checks the rules spanning several fields: a non-zero repeat must outlast the animation. */
function checkRepeat(effect: AnimatedEffect): void {
  if (effect.kind !== 'pulsesolid' && effect.kind !== 'chasesolid' && effect.kind !== 'togglesolid') return;
  const animationField = ANIMATION_FIELD[effect.kind];
  const animationMs = (effect as unknown as Record<string, number>)[animationField] as number;
  if (effect.repeat_s !== 0 && effect.repeat_s * 1000 <= animationMs) {
    throw new WireError('repeat_s', `repeat_s must be 0 or longer than the animation (${animationField} ${animationMs} ms), got ${effect.repeat_s} s`);
  }
}

/** Parses a light effect (no overlay). */
export function parseEffect(text: string): LightEffect {
  if (text === 'off') return { kind: 'off' };
  const colon = text.indexOf(':');
  const keyword = colon < 0 ? text : text.slice(0, colon);
  if (!Object.prototype.hasOwnProperty.call(EFFECT_ARGS, keyword)) {
    throw new WireError('payload', `unknown light effect '${keyword}'; expected off, solid, pulse, chase, toggle, bluchase, pulsesolid, chasesolid or togglesolid`);
  }
  const kind = keyword as AnimatedEffect['kind'];
  const spec = EFFECT_ARGS[kind];
  const args = colon < 0 ? [] : text.slice(colon + 1).split(',');
  if (args.length !== spec.length) {
    throw new WireError('payload', `${kind} takes ${spec.length} argument(s) (${spec.map(([n]) => n).join(',')}), got ${colon < 0 ? 0 : args.length}`);
  }
  const effect: Record<string, string | number> = { kind };
  spec.forEach(([name, argKind], i) => {
    effect[name] = parseArg(args[i] as string, name, argKind);
  });
  const parsed = effect as unknown as AnimatedEffect;
  checkRepeat(parsed);
  return parsed;
}

/** Parses a light channel payload; overlays only where `overlays` allows them. */
export function parseLight(text: string, overlays: boolean): LightPayload {
  const at = text.lastIndexOf('@');
  if (at < 0) return parseEffect(text);
  if (!overlays) throw new WireError('payload', 'overlays (<effect>@<duration_ms>/<interval_ms>) are only for light2 and light3');
  const timing = text.slice(at + 1).split('/');
  if (timing.length !== 2) throw new WireError('payload', `an overlay ends with @<duration_ms>/<interval_ms>, got '@${text.slice(at + 1)}'`);
  const inner = text.slice(0, at);
  if (inner.includes('@')) throw new WireError('payload', 'an overlay cannot contain another overlay');
  const effect = parseEffect(inner);
  if (effect.kind === 'off') throw new WireError('payload', "an overlay plays an effect; 'off' cannot be one");
  const duration_ms = parseWhole(timing[0] as string, 'duration_ms', GRAMMAR.overlay_duration_ms);
  const interval_ms = parseOverlayInterval(timing[1] as string);
  return { kind: 'overlay', effect, duration_ms, interval_ms };
}

function parseOverlayInterval(text: string): number {
  if (text === '0') return 0;
  const b = GRAMMAR.overlay_interval_ms;
  if (!WHOLE.test(text)) throw new WireError('interval_ms', `interval_ms must be a whole number, got '${text}'`);
  const n = Number(text);
  if (n < b.min || n > b.max) throw new WireError('interval_ms', `interval_ms must be 0 or a whole number from ${b.min} to ${b.max}, got ${n}`);
  return n;
}

export function parseSound(text: string): SoundPayload {
  if (text === 'off') return { kind: 'off' };
  if (text === 'stop') return { kind: 'stop' };
  if (!text.startsWith('play:')) throw new WireError('payload', "sound takes play:<file>,<volume>[,<count>], stop or off");
  const args = text.slice(5).split(',');
  if (args.length !== 2 && args.length !== 3) throw new WireError('payload', 'play takes <file>,<volume>[,<count>]');
  const file = args[0] as string;
  if (!SOUND_FILE_PATTERN.test(file)) throw new WireError('file', `file must be 1 to 64 letters, digits, '.', '_' or '-', got '${file}'`);
  const volume_pct = parseWhole(args[1] as string, 'volume_pct', GRAMMAR.volume_pct);
  if (args.length === 2) return { kind: 'play', file, volume_pct };
  return { kind: 'play', file, volume_pct, count: parseWhole(args[2] as string, 'count', GRAMMAR.count) };
}

export function parseContact(text: string): ContactPayload {
  if (text === 'off') return { kind: 'off' };
  if (text === 'on') return { kind: 'on' };
  if (!text.startsWith('pulse:')) throw new WireError('payload', 'contact takes on, off or pulse:<ms>');
  return { kind: 'pulse', pulse_ms: parseWhole(text.slice(6), 'pulse_ms', GRAMMAR.contact_pulse_ms) };
}

/**
 * Parses a `cmd/<channel>` or `state/<channel>` payload with every grammar bound enforced.
 * Throws WireError naming the field. Availability caps are a separate check (`capViolation`).
 */
export function parsePayload(channel: string, payload: string): WirePayload {
  if (!isChannel(channel)) throw new WireError('channel', `channel must be one of ${LIGHT_CHANNELS.join(', ')}, got '${channel}'`);
  switch (channel) {
    case 'light1':
      return { channel, value: parseLight(payload, false) as LightEffect };
    case 'light2':
    case 'light3':
      return { channel, value: parseLight(payload, true) };
    case 'sound':
      return { channel, value: parseSound(payload) };
    case 'contact':
      return { channel, value: parseContact(payload) };
  }
}

/** The wire text of an effect (no checks: encode what parse or the converters produced). */
export function encodeEffect(effect: LightEffect): string {
  if (effect.kind === 'off') return 'off';
  const spec = EFFECT_ARGS[effect.kind];
  const fields = effect as unknown as Record<string, string | number>;
  return `${effect.kind}:${spec.map(([name]) => String(fields[name])).join(',')}`;
}

export function encodeLight(value: LightPayload): string {
  if (value.kind === 'overlay') return `${encodeEffect(value.effect)}@${value.duration_ms}/${value.interval_ms}`;
  return encodeEffect(value);
}

export function encodePayload(payload: WirePayload): string {
  switch (payload.channel) {
    case 'light1':
    case 'light2':
    case 'light3':
      return encodeLight(payload.value);
    case 'sound': {
      const v = payload.value;
      if (v.kind !== 'play') return v.kind;
      return `play:${v.file},${v.volume_pct}${v.count === undefined ? '' : `,${v.count}`}`;
    }
    case 'contact': {
      const v = payload.value;
      return v.kind === 'pulse' ? `pulse:${v.pulse_ms}` : v.kind;
    }
  }
}
