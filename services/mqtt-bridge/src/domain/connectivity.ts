/**
 * Turns device traffic into connectivity events, batched per flush window. Pure: the caller
 * feeds messages with their receive time and drains a batch on its schedule.
 *
 * Per device and window: `seen` (the device itself sent something; at = the latest such
 * receive time) at most once, and `offline` (its status topic carried `offline`; at = the
 * latest such receive time). Events come out in time order, so a device that went offline
 * after its last other message ends the batch with `offline`.
 */
import type { Product } from './topics';

export type ConnectivityKind = 'seen' | 'offline';

export interface ConnectivityEvent {
  device_id: string;
  product: Product;
  kind: ConnectivityKind;
  at: string;
}

interface DeviceWindow {
  product: Product;
  seenAt?: number;
  offlineAt?: number;
}

export class ConnectivityAggregator {
  private devices = new Map<string, DeviceWindow>();
  private count = 0;

  /** Events the next drain would return (at most two per device). */
  get size(): number {
    return this.count;
  }

  /** Records one device message. `offline` is true for `status` = `offline`. */
  record(deviceId: string, product: Product, receivedAt: number, offline: boolean): void {
    let entry = this.devices.get(deviceId);
    if (!entry) {
      entry = { product };
      this.devices.set(deviceId, entry);
    }
    if (offline) {
      if (entry.offlineAt === undefined) this.count += 1;
      entry.offlineAt = Math.max(entry.offlineAt ?? receivedAt, receivedAt);
    } else {
      if (entry.seenAt === undefined) this.count += 1;
      entry.seenAt = Math.max(entry.seenAt ?? receivedAt, receivedAt);
    }
  }

  /** Takes every event recorded so far, in time order, and starts a new window. */
  drain(): ConnectivityEvent[] {
    const out: { at: number; order: number; event: ConnectivityEvent }[] = [];
    for (const [deviceId, entry] of this.devices) {
      if (entry.seenAt !== undefined) out.push({ at: entry.seenAt, order: 0, event: event(deviceId, entry.product, 'seen', entry.seenAt) });
      if (entry.offlineAt !== undefined) out.push({ at: entry.offlineAt, order: 1, event: event(deviceId, entry.product, 'offline', entry.offlineAt) });
    }
    this.devices = new Map();
    this.count = 0;
    // Same millisecond: seen before offline, so a last will never loses to its own device's traffic.
    return out.sort((a, b) => a.at - b.at || a.order - b.order).map((e) => e.event);
  }
}

function event(deviceId: string, product: Product, kind: ConnectivityKind, at: number): ConnectivityEvent {
  return { device_id: deviceId, product, kind, at: new Date(at).toISOString() };
}

/** Splits events into batches of at most `max`, keeping their order. */
export function chunk<T>(items: T[], max: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += max) out.push(items.slice(i, i + max));
  return out;
}
