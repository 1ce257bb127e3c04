import { parsePayload, WireError, type LightEffect, type LightPayload, type WirePayload } from './grammar';

/** Milliseconds as seconds for people: 1200 → "1.2 s", 60000 → "60 s". */
export function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}

const hex = (color: string): string => `#${color}`;

function repeatText(repeat_s: number): string {
  return repeat_s === 0 ? ', once' : `, repeating every ${repeat_s} s`;
}

export function effectLabel(e: LightEffect): string {
  switch (e.kind) {
    case 'off':
      return 'Off';
    case 'solid':
      return `Solid ${hex(e.color)}`;
    case 'pulse':
      return `Pulse ${hex(e.color)} every ${seconds(e.period_ms)}`;
    case 'chase':
      return `Chase ${hex(e.color)} every ${seconds(e.period_ms)}, width ${e.width}`;
    case 'toggle':
      return `Toggle ${hex(e.color1)}/${hex(e.color2)} every ${seconds(e.period_ms)}, ${e.duty_pct}% duty`;
    case 'bluchase':
      return `Blue chase every ${seconds(e.period_ms)} at ${e.brightness_pct}% brightness`;
    case 'pulsesolid':
      return `Pulse ${hex(e.pulse_color)} every ${seconds(e.period_ms)} for ${seconds(e.pulse_ms)}, then solid ${hex(e.solid_color)}${repeatText(e.repeat_s)}`;
    case 'chasesolid':
      return `Chase ${hex(e.chase_color)} every ${seconds(e.period_ms)}, width ${e.width}, for ${seconds(e.chase_ms)}, then solid ${hex(e.solid_color)}${repeatText(e.repeat_s)}`;
    case 'togglesolid':
      return (
        `Toggle ${hex(e.color1)}/${hex(e.color2)} every ${seconds(e.period_ms)}, ${e.duty_pct}% duty, for ${seconds(e.toggle_ms)}, ` +
        `then solid ${hex(e.solid_color)}${repeatText(e.repeat_s)}`
      );
  }
}

export function lightLabel(value: LightPayload): string {
  if (value.kind !== 'overlay') return effectLabel(value);
  const timing = value.interval_ms === 0 ? 'once' : `every ${seconds(value.interval_ms)}`;
  return `Overlay: ${effectLabel(value.effect)} for ${seconds(value.duration_ms)} ${timing}`;
}

export function payloadLabel(payload: WirePayload): string {
  switch (payload.channel) {
    case 'light1':
    case 'light2':
    case 'light3':
      return lightLabel(payload.value);
    case 'sound': {
      const v = payload.value;
      if (v.kind === 'off') return 'Off';
      if (v.kind === 'stop') return 'Stopped';
      const times = v.count === undefined ? '' : `, ${v.count} time${v.count === 1 ? '' : 's'}`;
      return `Play ${v.file} at volume ${v.volume_pct}%${times}`;
    }
    case 'contact': {
      const v = payload.value;
      if (v.kind === 'off') return 'Off';
      if (v.kind === 'on') return 'On';
      return `Pulse for ${seconds(v.pulse_ms)}`;
    }
  }
}

/** The label people see for a reported state: an empty payload (idle) is "Off". */
export const UNRECOGNIZED_LABEL = 'Unrecognized payload';

export function stateLabel(channel: string, payload: string): string {
  if (payload === '') return 'Off';
  try {
    return payloadLabel(parsePayload(channel, payload));
  } catch (err) {
    if (err instanceof WireError) return UNRECOGNIZED_LABEL;
    throw err;
  }
}
