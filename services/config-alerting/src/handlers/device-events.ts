import type { NatsConnection } from 'nats';
import { durableEvents, type DurablePullConsumer, type Logger } from '@fleet/service-kit';
import { forgetDevice } from '../store/devices';
import type { ConfigDb } from '../store/prisma';

/**
 * A removed device's sensors, chosen signal, alert state and readings are forgotten (the spec's
 * removal cascades to sensor attachments). A durable consumer of the registry's device events:
 * removals while config-alerting was down are applied when it is back; only what predates the
 * removal goes, so a late replay never erases a device provisioned again since.
 */
export function forgetRemovedDevices(nc: NatsConnection, db: ConfigDb, logger: Logger, durable: string): DurablePullConsumer {
  return durableEvents(nc, {
    subject: 'evt.registry.device.changed.v1',
    durable,
    logger,
    handle: async (event) => {
      if (event.change !== 'removed') return;
      await db.$transaction((tx) => forgetDevice(tx, event.device_id, new Date(event.at)));
      logger.debug({ device_id: event.device_id }, 'forgot a removed device');
    },
  });
}
