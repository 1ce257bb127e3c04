import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/** The two products of device protocol v1. */
export type Product = 'light' | 'meter';
export const PRODUCTS: readonly Product[] = ['light', 'meter'];

const DEVICE_ID = /^[0-9A-F]{12}$/;
/** 16 printable ASCII characters without whitespace (0x21–0x7E). */
const ROOT_SECRET = /^[\x21-\x7e]{16}$/;
const BROKER_PASSWORD = /^[0-9a-f]{32}$/;

export function isDeviceId(value: string): boolean {
  return DEVICE_ID.test(value);
}

export function assertDeviceId(value: string): void {
  if (!isDeviceId(value)) throw new Error(`device id must be 12 uppercase hex characters, got '${value}'`);
}

export function assertRootSecret(value: string): void {
  if (!ROOT_SECRET.test(value)) throw new Error('root secret must be 16 printable ASCII characters without whitespace');
}

export function assertBrokerPassword(value: string): void {
  if (!BROKER_PASSWORD.test(value)) throw new Error('broker password must be 32 lowercase hex characters');
}

/**
 * The broker password of a device provisioned with `credential_source` `generate` or
 * `root_secret`: HKDF-SHA256(IKM = root secret as ASCII, salt = device id as ASCII,
 * info = `<product>/mqtt/v1`, 16 bytes), written as 32 lowercase hex characters.
 */
export function deriveBrokerPassword(rootSecret: string, deviceId: string, product: Product): string {
  assertRootSecret(rootSecret);
  assertDeviceId(deviceId);
  return Buffer.from(hkdfSync('sha256', Buffer.from(rootSecret, 'ascii'), Buffer.from(deviceId, 'ascii'), Buffer.from(`${product}/mqtt/v1`, 'ascii'), 16)).toString('hex');
}

/** The device's settings key: HKDF-SHA256(root secret, device id, `<product>/settings/v1`, 32 bytes). */
export function deriveSettingsKey(rootSecret: string, deviceId: string, product: Product): Buffer {
  assertRootSecret(rootSecret);
  assertDeviceId(deviceId);
  return Buffer.from(hkdfSync('sha256', Buffer.from(rootSecret, 'ascii'), Buffer.from(deviceId, 'ascii'), Buffer.from(`${product}/settings/v1`, 'ascii'), 32));
}

/** Setting keys the firmware never shows or accepts in clear. */
export function isSecretSettingKey(key: string): boolean {
  return /pass|pwd|key|token|secret|psk/i.test(key);
}

/** Seals a secret setting value the way the platform does: `enc1:` + base64url(nonce || ciphertext || tag). */
export function sealSetting(settingsKey: Buffer, deviceId: string, key: string, value: string, nonce: Buffer = randomBytes(12)): string {
  const cipher = createCipheriv('aes-256-gcm', settingsKey, nonce);
  cipher.setAAD(Buffer.from(`${deviceId}|${key}`, 'ascii'));
  const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
  return `enc1:${Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64url')}`;
}

/** Opens an `enc1:` value; throws when it is malformed or does not authenticate. */
export function openSetting(settingsKey: Buffer, deviceId: string, key: string, sealed: string): string {
  if (!sealed.startsWith('enc1:')) throw new Error('not an enc1 value');
  const raw = Buffer.from(sealed.slice(5), 'base64url');
  if (raw.length < 12 + 16) throw new Error('enc1 value too short');
  const decipher = createDecipheriv('aes-256-gcm', settingsKey, raw.subarray(0, 12));
  decipher.setAAD(Buffer.from(`${deviceId}|${key}`, 'ascii'));
  decipher.setAuthTag(raw.subarray(raw.length - 16));
  return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString('utf8');
}

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
