import { isSecretSettingKey, settingDef, type SettingDef } from '@fleet/contracts';
import { ValidationError } from '@fleet/service-kit';

/**
 * A settings write's value as the device reads it after `set>key=`: checked against the
 * settings catalog (proto-schemas/system/registry.json). Integers in range, strings within
 * length (in the unit the catalog gives) and pattern. A clear value never holds `;` (it ends a
 * `k=v` pair) nor control characters; a secret one may, since it travels sealed (`enc1:` +
 * base64url).
 */
export function settingText(key: string, value: unknown): string {
  const def = settingDef(key);
  if (!def) throw new ValidationError(`invalid 'key': '${key}' is not in the settings catalog (GET /v1/system/commands lists it)`);
  return def.type === 'integer' ? integerText(def, value) : stringText(def, value);
}

function integerText(def: SettingDef, value: unknown): string {
  const n = typeof value === 'string' && /^-?\d{1,15}$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n)) throw new ValidationError(`invalid 'value': ${def.key} is an integer`);
  if ((def.min !== undefined && n < def.min) || (def.max !== undefined && n > def.max)) {
    throw new ValidationError(`invalid 'value': ${def.key} is from ${def.min} to ${def.max}`);
  }
  return String(n);
}

/**
 * A string's length as the catalog counts it for a key: UTF-8 bytes where it says so
 * (`lengthUnit: bytes`, e.g. wifiSsid: an SSID is at most 32 octets), else characters (code points).
 */
export function settingLength(def: Pick<SettingDef, 'lengthUnit'>, value: string): number {
  return def.lengthUnit === 'bytes' ? Buffer.byteLength(value, 'utf8') : [...value].length;
}

function stringText(def: SettingDef, value: unknown): string {
  if (typeof value !== 'string') throw new ValidationError(`invalid 'value': ${def.key} is a string`);
  const length = settingLength(def, value);
  const unit = def.lengthUnit === 'bytes' ? 'bytes (UTF-8)' : 'characters';
  if (def.minLength !== undefined && length < def.minLength) throw new ValidationError(`invalid 'value': ${def.key} needs at least ${def.minLength} ${unit}`);
  if (def.maxLength !== undefined && length > def.maxLength) throw new ValidationError(`invalid 'value': ${def.key} takes at most ${def.maxLength} ${unit}`);
  if (def.enum && !def.enum.includes(value)) throw new ValidationError(`invalid 'value': ${def.key} is one of ${def.enum.join(', ')}`);
  if (def.pattern && !new RegExp(def.pattern).test(value)) throw new ValidationError(`invalid 'value': not a valid ${def.key}`);
  // eslint-disable-next-line no-control-regex
  if (!isSecretSettingKey(def.key) && /[;\x00-\x1f\x7f]/.test(value)) throw new ValidationError(`invalid 'value': ';' and control characters cannot be sent in a setting`);
  return value;
}
