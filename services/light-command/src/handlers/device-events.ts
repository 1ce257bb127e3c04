import type { NatsConnection } from 'nats';
import { durableEvents, type DurablePullConsumer, type Logger } from '@fleet/service-kit';
import type { LightDb } from '../store/prisma';
import { forgetDevice } from '../store/states';

/**
 * A removed device's last states are forgotten, so an id provisioned again starts with none.
 * A durable consumer of the registry's device events: removals that happened while
 * light-command was down are applied when it is back. Only states reported before the removal
 * go, so a late replay never erases what a device provisioned again has reported since.
 */
export function forgetRemovedDevices(nc: NatsConnection, db: LightDb, logger: Logger, durable = 'light-command-device-events'): DurablePullConsumer {
  return durableEvents(nc, {
    subject: 'evt.registry.device.changed.v1',
    durable,
    logger,
    handle: async (event) => {
      if (event.change !== 'removed') return;
      const count = await forgetDevice(db, event.device_id, new Date(event.at));
      logger.debug({ device_id: event.device_id, count }, 'forgot the state of a removed device');
    },
  });
}
