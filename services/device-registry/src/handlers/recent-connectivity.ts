import type { NatsConnection, Subscription } from 'nats';
import type { Logger } from '@fleet/service-kit';
import { applyEffect, effectSince, later, parseBatch, summarizeBatch, type ConnectivityState } from '../domain/connectivity';

/** How long a heard batch is kept: far longer than the durable consumer takes to store it. */
const HOLD_MS = 60_000;

interface HeardEffect {
  seenAt: Date | null;
  offlineAt: Date | null;
  heardAt: number;
}

/** A stored device's connectivity fields (a DeviceRecord's). */
export interface StoredConnectivity {
  deviceId: string;
  status: string;
  statusChangedAt: Date | null;
  lastSeenAt: Date | null;
  /** When the record was created: what was heard before it is of an earlier device with the id. */
  createdAt: Date;
}

/**
 * The bridges' connectivity batches as they are published, heard on a plain subscription by
 * every replica, laid over the stored state when a device is read.
 *
 * The durable consumer stores each batch in a transaction of its own; between the bridge
 * publishing a batch and that commit, a read would show a device that has just sent its first
 * message as disconnected. Overlaying what was heard, by the same rules the store applies
 * (applyEffect), closes that gap: a device reads as connected as soon as a bridge reported it.
 * A batch missed here (this replica was reconnecting) only means the stored state is read
 * until the consumer commits it.
 */
export class RecentConnectivity {
  private readonly heard = new Map<string, HeardEffect>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private subscription?: Subscription;
  private lastPrune = Date.now();

  constructor(
    private readonly nc: NatsConnection,
    private readonly subject: string,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.subscription = this.nc.subscribe(this.subject, {
      callback: (err, msg) => {
        if (err) return;
        try {
          this.take(msg.json());
        } catch {
          // Not JSON: the durable consumer logs and drops it.
        }
      },
    });
  }

  stop(): void {
    this.subscription?.unsubscribe();
  }

  /** Adds one batch (exported for tests; normally fed by the subscription). */
  take(payload: unknown): void {
    const now = Date.now();
    for (const effect of summarizeBatch(parseBatch(payload).events)) {
      const held = this.heard.get(effect.deviceId);
      this.heard.set(effect.deviceId, {
        seenAt: later(held?.seenAt ?? null, effect.seenAt),
        offlineAt: later(held?.offlineAt ?? null, effect.offlineAt),
        heardAt: now,
      });
      const waiting = this.waiters.get(effect.deviceId);
      if (waiting) for (const wake of waiting) wake();
    }
    if (now - this.lastPrune > HOLD_MS / 4) this.prune(now);
  }

  /**
   * The device's state with what was heard of it laid over. Only what was heard since the record
   * was created counts (effectSince): a device removed and provisioned again under the same id
   * does not inherit what its predecessor sent, on any replica, for as long as it is held here.
   */
  overlay<T extends StoredConnectivity>(device: T): T {
    const held = this.heard.get(device.deviceId);
    const heard = held && effectSince(held, device.createdAt);
    if (!heard || (heard.seenAt === null && heard.offlineAt === null)) return device;
    const stored: ConnectivityState = { status: device.status === 'connected' ? 'connected' : 'disconnected', statusChangedAt: device.statusChangedAt, lastSeenAt: device.lastSeenAt };
    return { ...device, ...applyEffect(stored, heard) };
  }

  /**
   * The device's state once it reads as connected, or after `waitMs` as it then reads. For a
   * request that needs a connected device right after the device's first message: the broker
   * acknowledges a device's message before a bridge receives it.
   */
  async whenConnected<T extends StoredConnectivity>(device: T, waitMs: number): Promise<T> {
    let current = this.overlay(device);
    if (current.status === 'connected' || waitMs <= 0) return current;
    let wake: () => void = () => undefined;
    const deadline = Date.now() + waitMs;
    const set = this.waiters.get(device.deviceId) ?? new Set();
    this.waiters.set(device.deviceId, set);
    try {
      while (current.status !== 'connected' && Date.now() < deadline) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, deadline - Date.now());
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
          set.add(wake);
        });
        set.delete(wake);
        current = this.overlay(device);
      }
      return current;
    } finally {
      set.delete(wake);
      if (set.size === 0) this.waiters.delete(device.deviceId);
    }
  }

  private prune(now: number): void {
    this.lastPrune = now;
    for (const [deviceId, effect] of this.heard) if (now - effect.heardAt > HOLD_MS) this.heard.delete(deviceId);
    this.logger.debug({ held: this.heard.size }, 'recent connectivity pruned');
  }
}
