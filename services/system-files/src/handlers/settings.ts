import type { HandlerResult, RequestOf } from '@fleet/service-kit';
import { readSettings } from '../store/settings';
import { deviceOf } from './commands';
import type { SystemDeps } from './deps';

/**
 * GET /v1/devices/{device_id}/system/settings: what the device last reported, masked values as it
 * sent them. A device that has not reported yet (it does after every connect, and on `query`) has
 * an empty cache: no settings, `received_at` null. 404 stays what the spec makes it, a device
 * outside the scope or none at all.
 */
export async function readDeviceSettings(deps: SystemDeps, req: RequestOf<'system.settings.get'>): Promise<HandlerResult> {
  const { deviceId } = deviceOf(req);
  const stored = await readSettings(deps.db, deviceId);
  const settings = stored?.settings ?? {};
  return {
    status: 200,
    body: {
      device_id: deviceId,
      settings,
      fw_ver: typeof settings.fw_ver === 'string' ? settings.fw_ver : null,
      file_list: Array.isArray(settings.file_list) ? settings.file_list : [],
      received_at: stored ? stored.receivedAt.toISOString() : null,
    },
  };
}
