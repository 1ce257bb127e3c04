import { createCipheriv, createDecipheriv, hkdfSync, randomBytes, randomInt } from 'node:crypto';
import type { Product } from './products';

/**
 * The device credential and secret-setting cryptography of device-protocol.md. Pure
 * functions (randomness aside): no keys are read from the environment here.
 */

/** HKDF-SHA256 (RFC 5869): extract with the salt, expand with the info to `length` bytes. */
export function hkdfSha256(ikm: Buffer, salt: Buffer, info: Buffer, length: number): Buffer {
  return Buffer.from(hkdfSync('sha256', ikm, salt, info, length));
}

/** The 32 lowercase hex broker password: HKDF(root secret, salt device id, info `<product>/mqtt/v1`, 16 bytes). */
export function deriveBrokerPassword(rootSecret: string, deviceId: string, product: Product): string {
  return hkdfSha256(Buffer.from(rootSecret, 'ascii'), Buffer.from(deviceId, 'ascii'), Buffer.from(`${product}/mqtt/v1`, 'ascii'), 16).toString('hex');
}

/** The device's 32-byte settings key: HKDF(root secret, salt device id, info `<product>/settings/v1`). */
export function deriveSettingsKey(rootSecret: string, deviceId: string, product: Product): Buffer {
  return hkdfSha256(Buffer.from(rootSecret, 'ascii'), Buffer.from(deviceId, 'ascii'), Buffer.from(`${product}/settings/v1`, 'ascii'), 32);
}

/** Printable ASCII without whitespace: 0x21..0x7E. */
const ROOT_SECRET_ALPHABET = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i)).join('');
export const ROOT_SECRET_PATTERN = /^[\x21-\x7E]{16}$/;

/** A fresh 16-character root secret from the CSPRNG (uniform over the 94 printable characters). */
export function generateRootSecret(): string {
  let out = '';
  for (let i = 0; i < 16; i++) out += ROOT_SECRET_ALPHABET[randomInt(ROOT_SECRET_ALPHABET.length)];
  return out;
}

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

function base64url(buf: Buffer): string {
  return buf.toString('base64url');
}

/** AES-256-GCM of `plaintext` with a fresh 12-byte nonce; returns nonce || ciphertext || tag. */
function gcmSeal(key: Buffer, plaintext: Buffer, aad: Buffer, nonce: Buffer = randomBytes(NONCE_BYTES)): Buffer {
  if (key.length !== 32) throw new Error('AES-256-GCM needs a 32-byte key');
  if (nonce.length !== NONCE_BYTES) throw new Error('AES-256-GCM nonce must be 12 bytes');
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([nonce, body, cipher.getAuthTag()]);
}

/** Opens nonce || ciphertext || tag; throws when the key, AAD or bytes do not match. */
function gcmOpen(key: Buffer, sealed: Buffer, aad: Buffer): Buffer {
  if (sealed.length < NONCE_BYTES + TAG_BYTES) throw new Error('sealed value too short');
  const nonce = sealed.subarray(0, NONCE_BYTES);
  const tag = sealed.subarray(sealed.length - TAG_BYTES);
  const body = sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES);
  const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(body), decipher.final()]);
}

export const ENC1_PREFIX = 'enc1:';

/** The `enc1:` envelope of a secret setting value, bound to the device and key name (AAD `<device_id>|<key>`). */
export function sealSetting(settingsKey: Buffer, deviceId: string, key: string, value: string, nonce?: Buffer): string {
  const sealed = gcmSeal(settingsKey, Buffer.from(value, 'utf8'), Buffer.from(`${deviceId}|${key}`, 'ascii'), nonce);
  return `${ENC1_PREFIX}${base64url(sealed)}`;
}

/** Opens an `enc1:` value (what a device does); throws when it was not sealed for this device and key. */
export function openSetting(settingsKey: Buffer, deviceId: string, key: string, envelope: string): string {
  if (!envelope.startsWith(ENC1_PREFIX)) throw new Error('not an enc1: value');
  const sealed = Buffer.from(envelope.slice(ENC1_PREFIX.length), 'base64url');
  return gcmOpen(settingsKey, sealed, Buffer.from(`${deviceId}|${key}`, 'ascii')).toString('utf8');
}

/** A setting key whose value must travel sealed (device-protocol.md "Secret setting envelope"). */
export function isSecretSettingKey(key: string): boolean {
  return /pass|pwd|key|token|secret|psk/i.test(key);
}

/**
 * At-rest form of a device's settings key: `v1.` + base64url(nonce || AES-256-GCM(KEK, key) || tag),
 * with AAD `settings-key|<device_id>` so a ciphertext cannot be moved to another device's row.
 */
export function encryptSettingsKey(kek: Buffer, deviceId: string, settingsKey: Buffer): string {
  return `v1.${base64url(gcmSeal(kek, settingsKey, Buffer.from(`settings-key|${deviceId}`, 'ascii')))}`;
}

export function decryptSettingsKey(kek: Buffer, deviceId: string, stored: string): Buffer {
  if (!stored.startsWith('v1.')) throw new Error('unknown settings key format');
  return gcmOpen(kek, Buffer.from(stored.slice(3), 'base64url'), Buffer.from(`settings-key|${deviceId}`, 'ascii'));
}
