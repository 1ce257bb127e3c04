import { CHANNELS, PERMISSIONS, type Channel, type Permission } from '@fleet/contracts';

export const DEFAULT_REQUESTS_PER_MIN = 600;
export const DEFAULT_DEVICE_COMMANDS_PER_MIN = 60;

/**
 * Permissions `all` leaves out, granted only when named: the scope permission (a partner sees
 * every device) and the internal raw MQTT permissions.
 */
export const NOT_IN_ALL: readonly Permission[] = ['access_all_devices', 'raw_mqtt_devices', 'raw_mqtt_global'];

/**
 * Parses a comma list of permission keys; `all` in the list stands for every permission but
 * NOT_IN_ALL (so `all,raw_mqtt_devices` adds one of them). Unknown keys are an error.
 */
export function parsePermissions(list: string): Permission[] {
  const wanted = splitList(list);
  const unknown = wanted.filter((p) => p !== 'all' && !(PERMISSIONS as readonly string[]).includes(p));
  if (unknown.length) throw new Error(`unknown permission(s): ${unknown.join(', ')}`);
  const all = wanted.includes('all');
  return PERMISSIONS.filter((p) => wanted.includes(p) || (all && !NOT_IN_ALL.includes(p)));
}

/** Parses a comma list of channels; unknown channels are an error. */
export function parseChannels(list: string): Channel[] {
  const wanted = splitList(list);
  const unknown = wanted.filter((c) => !(CHANNELS as readonly string[]).includes(c));
  if (unknown.length) throw new Error(`unknown channel(s): ${unknown.join(', ')}`);
  return CHANNELS.filter((c) => wanted.includes(c));
}

/** The account's permissions as the spec shows them: every key, granted or not. */
export function permissionMap(granted: readonly string[]): Record<Permission, boolean> {
  return Object.fromEntries(PERMISSIONS.map((p) => [p, granted.includes(p)])) as Record<Permission, boolean>;
}

function splitList(list: string): string[] {
  return list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}
