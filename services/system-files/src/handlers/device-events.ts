import type { NatsConnection } from 'nats';
import { durableEvents, type DurablePullConsumer, type Logger } from '@fleet/service-kit';
import type { SystemDb } from '../store/prisma';
import { forgetRemovedDevice } from '../store/removals';

export interface DeviceEventsOptions {
  /** The durable consumer's name (DEVICE_EVENTS_CONSUMER), shared by every replica. */
  durable: string;
  /** Tests: a subject prefix and a stream of their own. */
  prefix?: string;
  stream?: string;
}

/**
 * A removed device is forgotten (its cached settings, response-feed rows and file transfers),
 * so an id provisioned again starts clean: a durable consumer of device-registry's device events
 * (REGISTRY_EVENTS, evt.registry.device.changed.v1), so removals that happened while
 * system-files was down are applied when it is back. Only what predates the removal goes, so a
 * late replay never erases what a device provisioned again has reported since.
 */
export function forgetRemovedDevices(nc: NatsConnection, db: SystemDb, logger: Logger, options: DeviceEventsOptions): DurablePullConsumer {
  return durableEvents(nc, {
    subject: 'evt.registry.device.changed.v1',
    durable: options.durable,
    logger,
    ...(options.prefix !== undefined ? { prefix: options.prefix } : {}),
    ...(options.stream !== undefined ? { stream: options.stream } : {}),
    handle: async (event) => {
      if (event.change !== 'removed') return;
      const forgotten = await forgetRemovedDevice(db, event.device_id, new Date(event.at));
      logger.info({ device_id: event.device_id, ...forgotten }, 'forgot a removed device');
    },
  });
}
