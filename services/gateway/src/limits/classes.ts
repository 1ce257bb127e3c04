import type { WindowSpec } from './sliding-window';

/** Limit classes a route can spend from (besides the per-partner request limit every request spends from). */
export type LimitClass = 'device_command' | 'config_mutation' | 'destructive';

export const LIMIT_CLASSES: readonly LimitClass[] = ['device_command', 'config_mutation', 'destructive'];

export interface LimitSettings {
  /** Per-partner configuration mutations per minute. */
  configMutationsPerMin: number;
  /** Per-partner destructive operations per hour (destructive verbs, connection/identity settings, device removal, energy reset). */
  destructivePerHour: number;
  /** Commands per minute to one device, summed over all partners. */
  deviceCeilingPerMin: number;
}

export const DEFAULT_LIMIT_SETTINGS: LimitSettings = { configMutationsPerMin: 30, destructivePerHour: 20, deviceCeilingPerMin: 120 };

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;

/** Key parts are URI-encoded so a ':' inside an id cannot make two different windows share a key. */
const part = (value: string): string => encodeURIComponent(value);

/** The per-partner request window every authenticated request spends from (RateLimit-* headers). */
export function requestWindowFor(ctx: { partnerId: string; requestsPerMin: number }): WindowSpec {
  return { key: `req:${part(ctx.partnerId)}`, limit: ctx.requestsPerMin, windowMs: MINUTE_MS };
}

/** The windows a request of a limit class spends from. */
export function windowsFor(
  cls: LimitClass,
  ctx: { partnerId: string; deviceId?: string; deviceCommandsPerMin: number },
  settings: LimitSettings,
): WindowSpec[] {
  switch (cls) {
    case 'device_command': {
      if (ctx.deviceId === undefined || ctx.deviceId === '') throw new TypeError('device_command limits need a deviceId');
      return [
        { key: `cmd:${part(ctx.partnerId)}:${part(ctx.deviceId)}`, limit: ctx.deviceCommandsPerMin, windowMs: MINUTE_MS },
        { key: `cmdceil:${part(ctx.deviceId)}`, limit: settings.deviceCeilingPerMin, windowMs: MINUTE_MS },
      ];
    }
    case 'config_mutation':
      return [{ key: `cfg:${part(ctx.partnerId)}`, limit: settings.configMutationsPerMin, windowMs: MINUTE_MS }];
    case 'destructive':
      return [{ key: `destr:${part(ctx.partnerId)}`, limit: settings.destructivePerHour, windowMs: HOUR_MS }];
    default: {
      const unknown: never = cls;
      throw new TypeError(`unknown limit class ${String(unknown)}`);
    }
  }
}
