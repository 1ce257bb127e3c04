import type { Principal } from '@fleet/contracts';
import { permissionMap } from '../domain/partner-settings';

/** GET /v1/account: the calling partner as the spec's Account resource. */
export function accountBody(principal: Principal): Record<string, unknown> {
  return {
    partner: {
      name: principal.name,
      key_prefix: principal.key_prefix,
      permissions: permissionMap(principal.permissions),
      allowed_channels: principal.allowed_channels,
      rate_limits: {
        requests_per_min: principal.limits.requests_per_min,
        device_commands_per_min: principal.limits.device_commands_per_min,
      },
    },
  };
}
