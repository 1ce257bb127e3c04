import { runStaffCli, withMigratedDatabase } from '@fleet/db';
import { readMeterConfig } from '../config';
import { MIGRATIONS_DIR } from '../migrations';
import { openMeterDb } from '../store/prisma';
import { clearDevice } from '../store/records';
import { isDeviceId } from '@fleet/device-protocol';

class AdminError extends Error {}

const USAGE = 'usage: meter clear --device <device_id>';

/** Parses `meter clear --device <id>`. */
export function parseAdminArgs(argv: string[]): { command: 'clear'; deviceId: string } {
  const [entity, verb, ...rest] = argv;
  if (entity !== 'meter' || verb !== 'clear') throw new AdminError(USAGE);
  let deviceId: string | undefined;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i] as string;
    if (arg === '--device') deviceId = rest[++i];
    else if (arg.startsWith('--device=')) deviceId = arg.slice('--device='.length);
    else throw new AdminError(`unknown option '${arg}'; ${USAGE}`);
  }
  if (!isDeviceId(deviceId)) throw new AdminError(`--device needs a device id (12 uppercase hexadecimal characters); ${USAGE}`);
  return { command: 'clear', deviceId };
}

/**
 * Staff commands for meter records, run against the meter's own database whether or not the
 * fleet is running. `meter clear --device <id>`: every record received so far stops being
 * listed; records that started before now are not stored if they arrive later. Prints one JSON object.
 */
if (require.main === module) {
  runStaffCli(async () => {
    const args = parseAdminArgs(process.argv.slice(2));
    const config = readMeterConfig({ ...process.env, HEALTH_PORT: process.env.HEALTH_PORT ?? '0' });
    const result = await withMigratedDatabase(config.DATABASE_URL, MIGRATIONS_DIR, (url) => openMeterDb(url, 2), (db) => clearDevice(db, args.deviceId));
    return { device_id: args.deviceId, ...result };
  }, (err) => err instanceof AdminError);
}
