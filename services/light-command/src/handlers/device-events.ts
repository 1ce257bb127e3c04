import type { Bus, Logger } from '@fleet/service-kit';
import type { LightDb } from '../store/prisma';
import { forgetDevice } from '../store/states';

interface DeviceChanged {
  device_id: string;
  change: 'provisioned' | 'updated' | 'moved' | 'removed';
  at: string;
}

/** A removed device's last states are forgotten, so an id provisioned again starts with none. */
export function forgetRemovedDevices(bus: Bus, db: LightDb, logger: Logger): void {
  bus.subscribe<DeviceChanged>('evt.registry.device.changed', (event) => {
    if (event.change !== 'removed') return;
    forgetDevice(db, event.device_id).then(
      (count) => logger.debug({ device_id: event.device_id, count }, 'forgot the state of a removed device'),
      (err) => logger.warn({ err, device_id: event.device_id }, 'could not forget the state of a removed device'),
    );
  });
}
