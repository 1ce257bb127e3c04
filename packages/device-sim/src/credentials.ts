/** The simulator's credentials: device protocol v1 (from @fleet/device-protocol) and ids made from a prefix. */
export {
  assertBrokerPassword,
  assertDeviceId,
  assertRootSecret,
  deriveBrokerPassword,
  deriveSettingsKey,
  isDeviceId,
  isSecretSettingKey,
  openSetting,
  PRODUCTS,
  sealSetting,
  type Product,
} from '@fleet/device-protocol';

/** Device ids from a hex prefix: the prefix, then the index in hex, zero-padded to 12 characters. */
export function deviceIdsFromPrefix(prefix: string, count: number, startIndex = 0): string[] {
  const p = prefix.toUpperCase();
  if (!/^[0-9A-F]{0,11}$/.test(p)) throw new Error('id prefix must be 0–11 hex characters');
  const width = 12 - p.length;
  const last = startIndex + count - 1;
  if (count < 0 || startIndex < 0 || (count > 0 && last >= 16 ** width)) throw new Error(`${count} ids from index ${startIndex} do not fit after prefix '${p}'`);
  const ids: string[] = [];
  for (let k = 0; k < count; k++) ids.push(p + (startIndex + k).toString(16).toUpperCase().padStart(width, '0'));
  return ids;
}
