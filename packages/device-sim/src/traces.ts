import type { EventEmitter } from 'node:events';
import type { Clock } from './clock';
import type { DeviceMessage, SimStats } from './device-types';

export type Direction = 'sent' | 'received';

/**
 * What a device sent and received, byte for byte: the last `limit` messages each way (none for
 * pools, which set 0), the shared counters, and `sent` / `received` events on the device for
 * tests that wait for a message.
 */
export class MessageTraces {
  readonly received: DeviceMessage[] = [];
  readonly sent: DeviceMessage[] = [];

  constructor(
    private readonly device: EventEmitter & { readonly deviceId: string },
    private readonly stats: SimStats,
    private readonly clock: Clock,
    private readonly limit: number,
  ) {}

  /** Counts a message and keeps it (and announces it) when someone may look. */
  record(direction: Direction, topic: string, sub: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): void {
    this.stats[direction]++;
    const hasListeners = this.device.listenerCount(direction) > 0;
    if (this.limit <= 0 && !hasListeners) return;
    const m: DeviceMessage = { topic, sub, payload, qos, retain, at: Date.now(), simAt: this.clock.now() };
    if (this.limit > 0) {
      const kept = this[direction];
      kept.push(m);
      if (kept.length > this.limit) kept.shift();
    }
    if (hasListeners) this.device.emit(direction, m);
  }

  /** Resolves with the first message (already kept, or arriving later) that matches. */
  waitFor(direction: Direction, match: (m: DeviceMessage) => boolean, timeoutMs: number): Promise<DeviceMessage> {
    const found = this[direction].find(match);
    if (found) return Promise.resolve(found);
    return this.next(direction, match, timeoutMs);
  }

  /** Resolves with the next message from now on that matches. */
  next(direction: Direction, match: (m: DeviceMessage) => boolean, timeoutMs: number): Promise<DeviceMessage> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.device.off(direction, listener);
        reject(new Error(`${this.device.deviceId}: no matching ${direction} message within ${timeoutMs} ms`));
      }, timeoutMs);
      const listener = (m: DeviceMessage) => {
        if (!match(m)) return;
        clearTimeout(timer);
        this.device.off(direction, listener);
        resolve(m);
      };
      this.device.on(direction, listener);
    });
  }
}
