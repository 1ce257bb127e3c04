import type { CallFor, SettingSealer } from '@fleet/registry-client';
import { ConflictError } from '@fleet/service-kit';
import { readSettings } from '../store/settings';
import type { SystemDb } from '../store/prisma';

export interface SealDeps {
  db: SystemDb;
  registry: SettingSealer;
}

const unavailable = (why: string): ConflictError =>
  new ConflictError(`The secret setting cannot be encrypted for this device (${why}); nothing was sent.`, 'encryption_unavailable');

/**
 * A secret setting's value in the device's `enc1:` envelope (sealed by device-registry, which
 * holds the device's settings key). 409 encryption_unavailable when the device reported
 * `enc: false` (firmware too old) or the registry holds no key for it; never a cleartext fallback.
 * The clear value is never logged.
 */
export async function sealSecret(deps: SealDeps, call: CallFor, deviceId: string, key: string, value: string): Promise<string> {
  const reported = await readSettings(deps.db, deviceId);
  if (reported?.settings.enc === false) throw unavailable('its firmware reported enc: false');
  return deps.registry.sealSetting(call, deviceId, key, value);
}
