import type { Principal } from '@fleet/contracts';
import { permissionMap } from '../domain/partner-settings';

const bodies = new WeakMap<Principal, Record<string, unknown>>();

/** GET /v1/account: the calling partner as the spec's Account resource (built once per principal). */
export function accountBody(principal: Principal): Record<string, unknown> {
  let body = bodies.get(principal);
  if (!body) {
    body = buildAccountBody(principal);
    bodies.set(principal, body);
  }
  return body;
}

function buildAccountBody(principal: Principal): Record<string, unknown> {
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
