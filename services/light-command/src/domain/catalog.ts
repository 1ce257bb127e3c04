import {
  apiEffectToWire,
  colorToRgb,
  GRAMMAR,
  OVERLAY_CHANNELS,
  overlayOf,
  SOUND_FILE_PATTERN,
  WireError,
  type LightChannel,
  type LightPayload,
  type WirePayload,
} from '@fleet/light-wire';

/**
 * The predefined command catalog: names, channels and parameters with their widest bounds
 * (inside the wire grammar and the availability caps, which always apply to predefined
 * effects). A partner holding predefined_commands has every command with these bounds unless
 * staff override a command for it: withdraw it, or narrow its numeric bounds.
 */

export interface NumberParam {
  name: string;
  type: 'number';
  unit: 's' | 'ratio' | '%' | 'count';
  min: number;
  max: number;
  default: number;
  /** The value's resolution: a value must be a whole multiple of it. */
  step: number;
  /** Channels the parameter applies to, when not every channel of the command. */
  channels?: LightChannel[];
  /** Besides [min, max]: a value that must be 0 or at least this (overlay interval cap). */
  zeroOrAtLeast?: number;
  description: string;
}

export interface TextParam {
  name: string;
  type: 'color' | 'file';
  default: string;
  channels?: LightChannel[];
  description: string;
}

export type ParamDef = NumberParam | TextParam;

export type ParamValues = Record<string, number | string>;

export interface CommandDef {
  name: string;
  description: string;
  channels: LightChannel[];
  params: ParamDef[];
  /** Builds the wire payload for a channel from complete, range-checked values. */
  build(channel: LightChannel, values: ParamValues): WirePayload;
}

const LIGHTS: LightChannel[] = ['light1', 'light2', 'light3'];
const MS = 0.001;

const period = (def: number, name = 'period_s'): NumberParam => ({
  name,
  type: 'number',
  unit: 's',
  min: 0.1,
  max: 9.999,
  default: def,
  step: MS,
  description: 'Animation period in seconds (availability cap: at least 0.1 s).',
});
const animation = (name: string, def: number): NumberParam => ({
  name,
  type: 'number',
  unit: 's',
  min: 0.1,
  max: 99.999,
  default: def,
  step: MS,
  description: 'How long the animation plays before the solid color, in seconds.',
});
const color = (name: string, def: string, description = 'Color, RRGGBB hexadecimal.'): TextParam => ({ name, type: 'color', default: def, description });
const width: NumberParam = { name: 'width', type: 'number', unit: 'count', min: 1, max: 12, default: 3, step: 1, description: 'Chase width in LEDs.' };
const duty: NumberParam = {
  name: 'duty_ratio',
  type: 'number',
  unit: 'ratio',
  min: 0.01,
  max: 0.99,
  default: 0.5,
  step: 0.01,
  description: 'Share of the period showing color1.',
};
const repeat: NumberParam = {
  name: 'repeat_s',
  type: 'number',
  unit: 's',
  min: 0,
  max: 999_999,
  default: 0,
  step: 1,
  description: 'Replay the animation every repeat_s seconds (0 = once); must outlast the animation.',
};

/** Overlay timing, on light2/light3 only: each light effect there is wrapped as a repeating overlay. */
export const OVERLAY_PARAMS: NumberParam[] = [
  {
    name: 'duration_s',
    type: 'number',
    unit: 's',
    min: 0.1,
    max: 600,
    default: 5,
    step: MS,
    channels: [...OVERLAY_CHANNELS],
    description: 'light2/light3: how long each occurrence of the overlay lasts, in seconds.',
  },
  {
    name: 'interval_s',
    type: 'number',
    unit: 's',
    min: 0,
    max: 86_400,
    default: 60,
    step: MS,
    zeroOrAtLeast: 10,
    channels: [...OVERLAY_CHANNELS],
    description: 'light2/light3: how often the overlay repeats, in seconds; 0 plays it once, otherwise at least 10 s.',
  },
];

const rgb = (v: number | string | undefined) => colorToRgb(String(v));

/** A light effect from its API form, wrapped as an overlay on light2/light3. */
function lightCommand(name: string, description: string, params: ParamDef[], toApi: (v: ParamValues) => Record<string, unknown>): CommandDef {
  return {
    name,
    description,
    channels: LIGHTS,
    params: [...params, ...OVERLAY_PARAMS],
    build(channel, values) {
      const effect = apiEffectToWire(toApi(values), 'params');
      if (channel === 'light1') return { channel, value: effect };
      const value: LightPayload = overlayOf(effect, { duration_s: values.duration_s, interval_s: values.interval_s }, 'params');
      return { channel: channel as 'light2' | 'light3', value };
    },
  };
}

export const CATALOG: readonly CommandDef[] = [
  {
    name: 'off',
    description: 'Turn the channel off (lights dark, sound stopped, relay open).',
    channels: ['light1', 'light2', 'light3', 'sound', 'contact'],
    params: [],
    build: (channel) => ({ channel, value: { kind: 'off' } }) as WirePayload,
  },
  lightCommand('solid', 'A steady color.', [color('color', 'FFFFFF')], (v) => ({ type: 'Solid', color: rgb(v.color) })),
  lightCommand('pulse', 'A color pulsing once per period.', [color('color', '0000FF'), period(1)], (v) => ({
    type: 'Pulse',
    color: rgb(v.color),
    period_s: v.period_s,
  })),
  lightCommand('chase', 'A chasing band of color.', [color('color', 'FF0000'), period(0.5), width], (v) => ({
    type: 'Chase',
    color: rgb(v.color),
    period_s: v.period_s,
    width: v.width,
  })),
  lightCommand('toggle', 'Alternating between two colors.', [color('color1', 'FF0000'), color('color2', '0000FF'), period(1), duty], (v) => ({
    type: 'Toggle',
    color1: rgb(v.color1),
    color2: rgb(v.color2),
    period_s: v.period_s,
    duty_ratio: v.duty_ratio,
  })),
  lightCommand(
    'bluchase',
    'The blue chase.',
    [
      period(1),
      { name: 'brightness_pct', type: 'number', unit: '%', min: 0, max: 99, default: 80, step: 1, description: 'Brightness in percent.' },
    ],
    (v) => ({ type: 'BluChase', period_s: v.period_s, brightness_per: v.brightness_pct }),
  ),
  lightCommand(
    'pulse_then_solid',
    'Pulse for a while, then a steady color; optionally repeated.',
    [animation('pulse_time_s', 5), color('pulse_color', 'FF0000'), period(0.5), color('solid_color', '00FF00'), repeat],
    (v) => ({
      type: 'PulseThenSolid',
      pulse_time_s: v.pulse_time_s,
      pulse_color: rgb(v.pulse_color),
      pulse_period_s: v.period_s,
      solid_color: rgb(v.solid_color),
      repeat_s: v.repeat_s,
    }),
  ),
  lightCommand(
    'chase_then_solid',
    'Chase for a while, then a steady color; optionally repeated.',
    [animation('chase_time_s', 5), color('chase_color', 'FF0000'), period(0.5), width, color('solid_color', '00FF00'), repeat],
    (v) => ({
      type: 'ChaseThenSolid',
      chase_time_s: v.chase_time_s,
      chase_color: rgb(v.chase_color),
      chase_period_s: v.period_s,
      chase_width: v.width,
      solid_color: rgb(v.solid_color),
      repeat_s: v.repeat_s,
    }),
  ),
  lightCommand(
    'toggle_then_solid',
    'Toggle for a while, then a steady color; optionally repeated.',
    [animation('toggle_time_s', 5), color('color1', 'FF0000'), color('color2', '0000FF'), period(1), duty, color('solid_color', '00FF00'), repeat],
    (v) => ({
      type: 'ToggleThenSolid',
      toggle_time_s: v.toggle_time_s,
      toggle_color1: rgb(v.color1),
      toggle_color2: rgb(v.color2),
      toggle_period_s: v.period_s,
      toggle_duty_ratio: v.duty_ratio,
      solid_color: rgb(v.solid_color),
      repeat_s: v.repeat_s,
    }),
  ),
  {
    name: 'sound_play',
    description: 'Play a sound file stored on the device.',
    channels: ['sound'],
    params: [
      { name: 'file', type: 'file', default: 'chime.mp3', description: 'A file on the device: 1 to 64 letters, digits, ., _ or -.' },
      { name: 'volume', type: 'number', unit: '%', min: 0, max: 100, default: 50, step: 1, description: 'Volume in percent.' },
      { name: 'count', type: 'number', unit: 'count', min: 1, max: GRAMMAR.count.max, default: 1, step: 1, description: 'How many times to play it.' },
    ],
    build: (_channel, v) => ({ channel: 'sound', value: { kind: 'play', file: String(v.file), volume_pct: Number(v.volume), count: Number(v.count) } }),
  },
  {
    name: 'sound_stop',
    description: 'Stop the sound playing.',
    channels: ['sound'],
    params: [],
    build: () => ({ channel: 'sound', value: { kind: 'stop' } }),
  },
  {
    name: 'contact_on',
    description: 'Close the relay until turned off.',
    channels: ['contact'],
    params: [],
    build: () => ({ channel: 'contact', value: { kind: 'on' } }),
  },
  {
    name: 'contact_pulse',
    description: 'Close the relay for a moment.',
    channels: ['contact'],
    params: [{ name: 'pulse_s', type: 'number', unit: 's', min: 0.05, max: 10, default: 1, step: MS, description: 'How long the relay stays closed, in seconds (cap: 10 s).' }],
    build: (_channel, v) => ({ channel: 'contact', value: { kind: 'pulse', pulse_ms: Math.round(Number(v.pulse_s) * 1000) } }),
  },
];

export const COMMAND_NAMES: readonly string[] = CATALOG.map((c) => c.name);

export function findCommand(name: string): CommandDef | undefined {
  return CATALOG.find((c) => c.name === name);
}

/** A narrowed numeric bound as staff set it. */
export interface NarrowedBound {
  min: number;
  max: number;
  default?: number;
}
export type Bounds = Record<string, NarrowedBound>;

/**
 * Whether a value sits on its parameter's step. A whole step takes whole values only: they go on
 * the wire as written (`play:<file>,<volume>,<count>`), where `50.0000001` is no number a device
 * reads. A fractional step allows the float error of decimals (0.3 is 3 steps of 0.1).
 */
export const isMultipleOf = (value: number, step: number): boolean =>
  Number.isInteger(step) ? Number.isInteger(value) && value % step === 0 : Math.abs(value / step - Math.round(value / step)) < 1e-6;

/** Staff's override of one command for one partner; a command without one is available with the catalog's bounds. */
export interface CommandOverride {
  withdrawn: boolean;
  bounds: Bounds;
}

export interface AvailableCommand {
  def: CommandDef;
  bounds: Bounds;
}

/**
 * The commands an account may use, in catalog order: the whole catalog minus the commands
 * withdrawn for it, each with its narrowed bounds. Overrides of names no longer in the catalog
 * are ignored, and a command added to the catalog is available until staff withdraw it.
 */
export function availableCommands(overrides: ReadonlyMap<string, CommandOverride>): AvailableCommand[] {
  return CATALOG.flatMap((def) => {
    const override = overrides.get(def.name);
    return override?.withdrawn ? [] : [{ def, bounds: override?.bounds ?? {} }];
  });
}

/** The effective numeric parameter for an account: the catalog's, narrowed by its override. */
export function effectiveParam(param: NumberParam, narrowed: NarrowedBound | undefined): NumberParam {
  if (!narrowed) return param;
  const def = narrowed.default ?? (param.default >= narrowed.min && param.default <= narrowed.max ? param.default : narrowed.min);
  return { ...param, min: narrowed.min, max: narrowed.max, default: def };
}

/** Checks a value of a numeric parameter against its (effective) bounds; a sentence when refused. */
export function numberProblem(param: NumberParam, value: number): string | null {
  const unit = param.unit === 's' ? ' s' : param.unit === '%' ? ' %' : '';
  if (value < param.min || value > param.max) return `must be from ${param.min} to ${param.max}${unit}, got ${value}`;
  if (!isMultipleOf(value, param.step)) return `must be a multiple of ${param.step}${unit}, got ${value}`;
  if (param.zeroOrAtLeast !== undefined && value !== 0 && value < param.zeroOrAtLeast) return `must be 0 or at least ${param.zeroOrAtLeast}${unit}, got ${value}`;
  return null;
}

/** Thrown for a bad predefined command request; `field` names what is wrong. */
export class CommandInputError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Resolves a predefined command on a channel into its wire payload: unknown parameters,
 * parameters that do not apply on the channel, wrong types and out-of-range values (against
 * the account's bounds) are refused naming the field; nothing is clamped. Missing parameters
 * take the effective default.
 */
export function buildCommand(def: CommandDef, channel: LightChannel, params: Record<string, unknown>, bounds: Bounds): WirePayload {
  if (!def.channels.includes(channel)) {
    throw new CommandInputError('channel', `${def.name} does not run on ${channel}; it runs on ${def.channels.join(', ')}`);
  }
  const applicable = def.params.filter((p) => !p.channels || p.channels.includes(channel));
  for (const key of Object.keys(params)) {
    const known = def.params.find((p) => p.name === key);
    if (!known) throw new CommandInputError(`params.${key}`, `params.${key} is not a parameter of ${def.name}`);
    if (!applicable.includes(known)) throw new CommandInputError(`params.${key}`, `params.${key} applies only on ${known.channels?.join(', ')}`);
  }
  const values: ParamValues = {};
  for (const p of applicable) {
    const field = `params.${p.name}`;
    const given = params[p.name];
    if (p.type === 'number') {
      const eff = effectiveParam(p, bounds[p.name]);
      if (given === undefined) {
        values[p.name] = eff.default;
        continue;
      }
      if (typeof given !== 'number' || !Number.isFinite(given)) throw new CommandInputError(field, `${field} must be a number`);
      const problem = numberProblem(eff, given);
      if (problem) throw new CommandInputError(field, `${field} ${problem}`);
      values[p.name] = given;
    } else {
      const value = given === undefined ? p.default : given;
      if (p.type === 'color' && (typeof value !== 'string' || !/^[0-9A-Fa-f]{6}$/.test(value))) {
        throw new CommandInputError(field, `${field} must be a color RRGGBB (6 hexadecimal digits)`);
      }
      if (p.type === 'file' && (typeof value !== 'string' || !SOUND_FILE_PATTERN.test(value))) {
        throw new CommandInputError(field, `${field} must be 1 to 64 letters, digits, '.', '_' or '-'`);
      }
      values[p.name] = p.type === 'color' ? (value as string).toUpperCase() : (value as string);
    }
  }
  try {
    return def.build(channel, values);
  } catch (err) {
    if (err instanceof WireError) throw new CommandInputError(err.field, err.message);
    throw err;
  }
}

/** The account's view of a command: channels it may use there and effective parameters. */
export function describeCommand(def: CommandDef, allowedChannels: readonly string[], bounds: Bounds): Record<string, unknown> {
  return {
    name: def.name,
    description: def.description,
    channels: def.channels.filter((c) => allowedChannels.includes(c)),
    parameters: def.params.map((p) => {
      const base: Record<string, unknown> = { name: p.name, type: p.type, description: p.description };
      if (p.channels) base.channels = p.channels;
      if (p.type === 'number') {
        const eff = effectiveParam(p, bounds[p.name]);
        Object.assign(base, { unit: eff.unit, min: eff.min, max: eff.max, default: eff.default, step: eff.step });
        if (eff.zeroOrAtLeast !== undefined) base.zero_or_at_least = eff.zeroOrAtLeast;
      } else {
        base.default = p.default;
      }
      return base;
    }),
  };
}

/** Validates staff's narrowing of a parameter: inside the catalog's bounds, on its step, default inside. */
export function checkNarrowing(def: CommandDef, param: string, bound: NarrowedBound): string | null {
  const p = def.params.find((x) => x.name === param);
  if (!p) return `${def.name} has no parameter '${param}'; it has ${def.params.map((x) => x.name).join(', ') || 'none'}`;
  if (p.type !== 'number') return `'${param}' is a ${p.type}; only numeric parameters have bounds`;
  if (!(bound.min <= bound.max)) return `'${param}': min must not exceed max`;
  for (const [label, v] of [['min', bound.min], ['max', bound.max], ...(bound.default === undefined ? [] : [['default', bound.default]])] as Array<[string, number]>) {
    const problem = numberProblem(p, v);
    if (problem) return `'${param}' ${label} ${problem} (the catalog's bounds, which staff may only narrow)`;
  }
  if (bound.default !== undefined && (bound.default < bound.min || bound.default > bound.max)) return `'${param}' default must lie within min and max`;
  return null;
}
