import { NotFoundError, type HandlerResult, type RequestOf } from '@fleet/service-kit';
import { readSettings } from '../store/settings';
import { deviceOf } from './commands';
import type { SystemDeps } from './deps';

/** GET /v1/devices/{device_id}/system/settings: what the device last reported, masked values as it sent them. */
export async function readDeviceSettings(deps: SystemDeps, req: RequestOf<'system.settings.get'>): Promise<HandlerResult> {
  const { deviceId } = deviceOf(req);
  const stored = await readSettings(deps.db, deviceId);
  if (!stored) throw new NotFoundError('The device has not reported its settings yet: it does after every connect, or send the query verb.');
  const { settings } = stored;
  return {
    status: 200,
    body: {
      device_id: deviceId,
      settings,
      fw_ver: typeof settings.fw_ver === 'string' ? settings.fw_ver : null,
      file_list: Array.isArray(settings.file_list) ? settings.file_list : [],
      received_at: stored.receivedAt.toISOString(),
    },
  };
}
