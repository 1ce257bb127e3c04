import type { StreamPlan } from '@fleet/service-kit';

/** DEVICE_IN: every device message (dev.in.>) and every message sent to a device (dev.out.>). */
export function deviceInStream(name: string, prefix: string, retentionHours: number): StreamPlan {
  return { name, subjects: [`${prefix}dev.in.>`, `${prefix}dev.out.>`], maxAgeMs: Math.round(retentionHours * 3_600_000) };
}

/** DEVICE_EVENTS: the bridge's events (evt.bridge.>), kept 7 days. */
export function deviceEventsStream(name: string, prefix: string): StreamPlan {
  return { name, subjects: [`${prefix}evt.bridge.>`], maxAgeMs: 7 * 24 * 3_600_000 };
}
