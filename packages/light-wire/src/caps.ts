import type { LightEffect, WirePayload } from './grammar';

/**
 * Availability caps (device-protocol.md): stricter than the grammar, enforced on every
 * predefined effect and alert signal, and on raw commands unless the partner holds relaxed_caps.
 */
export const CAPS = {
  /** No light period under 100 ms. */
  min_period_ms: 100,
  max_overlay_duration_ms: 600_000,
  /** Overlay interval: 0 (once) or at least this. */
  min_overlay_interval_ms: 10_000,
  max_contact_pulse_ms: 10_000,
} as const;

/** A cap a payload goes beyond: the field and a sentence saying which cap. */
export interface CapViolation {
  field: string;
  message: string;
}

function effectViolation(effect: LightEffect): CapViolation | null {
  if (effect.kind === 'off' || effect.kind === 'solid') return null;
  if (effect.period_ms < CAPS.min_period_ms) {
    return { field: 'period_ms', message: `period_ms must be at least ${CAPS.min_period_ms} ms (availability cap), got ${effect.period_ms}` };
  }
  return null;
}

/** The first availability cap the payload exceeds, or null when it keeps within all of them. */
export function capViolation(payload: WirePayload): CapViolation | null {
  switch (payload.channel) {
    case 'light1':
      return effectViolation(payload.value);
    case 'light2':
    case 'light3': {
      const v = payload.value;
      if (v.kind !== 'overlay') return effectViolation(v);
      const inner = effectViolation(v.effect);
      if (inner) return inner;
      if (v.duration_ms > CAPS.max_overlay_duration_ms) {
        return { field: 'duration_ms', message: `duration_ms must be at most ${CAPS.max_overlay_duration_ms} ms (availability cap), got ${v.duration_ms}` };
      }
      if (v.interval_ms !== 0 && v.interval_ms < CAPS.min_overlay_interval_ms) {
        return {
          field: 'interval_ms',
          message: `interval_ms must be 0 or at least ${CAPS.min_overlay_interval_ms} ms (availability cap), got ${v.interval_ms}`,
        };
      }
      return null;
    }
    case 'sound':
      return null;
    case 'contact': {
      const v = payload.value;
      if (v.kind === 'pulse' && v.pulse_ms > CAPS.max_contact_pulse_ms) {
        return { field: 'pulse_ms', message: `pulse_ms must be at most ${CAPS.max_contact_pulse_ms} ms (availability cap), got ${v.pulse_ms}` };
      }
      return null;
    }
  }
}
