import { randomUUID } from 'node:crypto';
import type { NatsConnection } from 'nats';
import { ensureStream, eventStreamPlan, publishDurable, type Logger } from '@fleet/service-kit';

/** The stream that keeps the registry's events (proto-schemas/subjects.json). */
export const REGISTRY_EVENTS_STREAM = 'REGISTRY_EVENTS';

export type DeviceChange = 'provisioned' | 'updated' | 'moved' | 'removed';

/** Publish attempts before an event is given up (about 6 s in all). */
const ATTEMPTS = 6;

/** Creates or updates REGISTRY_EVENTS (the registry owns it); called at start. */
export async function ensureRegistryEvents(nc: NatsConnection, logger: Logger): Promise<void> {
  await ensureStream(await nc.jetstreamManager(), eventStreamPlan(REGISTRY_EVENTS_STREAM), logger);
}

/** Who hears of committed device changes. */
export interface ChangeAnnouncer {
  changed(deviceId: string, change: DeviceChange): void;
}

/**
 * Announces committed device changes as durable events (evt.registry.device.changed.v1), one
 * after the other in the order of the changes, so a consumer never sees `removed` before the
 * `moved` that came first. A publish that fails is retried (and the stream created, should it
 * be missing); an event still not stored after that is logged as an error: consumers that were
 * down miss it (the change itself is committed).
 */
export class DeviceAnnouncer implements ChangeAnnouncer {
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly nc: NatsConnection,
    private readonly logger: Logger,
    private readonly now: () => Date = () => new Date(),
  ) {}

  changed(deviceId: string, change: DeviceChange): void {
    const event = { device_id: deviceId, change, at: this.now().toISOString() };
    const id = randomUUID();
    this.tail = this.tail.then(() => this.publish(event, id));
  }

  /** Resolves once every change announced so far was stored or given up. */
  settled(): Promise<void> {
    return this.tail;
  }

  private async publish(event: { device_id: string; change: DeviceChange; at: string }, id: string): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await publishDurable(this.nc, 'evt.registry.device.changed.v1', event, { id });
        return;
      } catch (err) {
        if (this.nc.isClosed() || attempt >= ATTEMPTS) {
          this.logger.error({ err, event }, 'device change not announced; consumers that were down miss it');
          return;
        }
        this.logger.warn({ err, event, attempt }, 'device change not announced yet; retrying');
        await ensureRegistryEvents(this.nc, this.logger).catch((e: unknown) => this.logger.warn({ err: e }, 'could not ensure the registry events stream'));
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
      }
    }
  }
}
