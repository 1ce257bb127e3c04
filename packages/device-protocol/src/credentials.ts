/**
 * Credentials derived from a device's root secret (docs/protocol.md): the broker password and
 * the settings key, each HKDF-SHA256 with IKM = the root secret as ASCII, salt = the device id
 * as ASCII and a label per product and purpose; and the `enc1:` envelope of secret settings.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes, randomInt } from 'node:crypto';
import { assertDeviceId, type Product } from './ids';

/** 16 printable ASCII characters without whitespace (0x21–0x7E). */
export const ROOT_SECRET_PATTERN = '^[\\x21-\\x7e]{16}$';
/** A broker password: 32 lowercase hexadecimal characters. */
export const BROKER_PASSWORD_PATTERN = '^[0-9a-f]{32}$';
const ROOT_SECRET = new RegExp(ROOT_SECRET_PATTERN);
const BROKER_PASSWORD = new RegExp(BROKER_PASSWORD_PATTERN);

/** The HKDF info labels, one per product and purpose. */
export const brokerPasswordLabel = (product: Product): string => `${product}/mqtt/v1`;
export const settingsKeyLabel = (product: Product): string => `${product}/settings/v1`;

export function isRootSecret(value: unknown): value is string {
  return typeof value === 'string' && ROOT_SECRET.test(value);
}

export function isBrokerPassword(value: unknown): value is string {
  return typeof value === 'string' && BROKER_PASSWORD.test(value);
}

export function assertRootSecret(value: string): void {
  if (!isRootSecret(value)) throw new Error('root secret must be 16 printable ASCII characters without whitespace');
}

export function assertBrokerPassword(value: string): void {
  if (!isBrokerPassword(value)) throw new Error('broker password must be 32 lowercase hex characters');
}

/** HKDF-SHA256 (RFC 5869): extract with the salt, expand with the info to `length` bytes. */
export function hkdfSha256(ikm: Buffer, salt: Buffer, info: Buffer, length: number): Buffer {
  return Buffer.from(hkdfSync('sha256', ikm, salt, info, length));
}

function derive(rootSecret: string, deviceId: string, label: string, length: number): Buffer {
  assertRootSecret(rootSecret);
  assertDeviceId(deviceId);
  return hkdfSha256(Buffer.from(rootSecret, 'ascii'), Buffer.from(deviceId, 'ascii'), Buffer.from(label, 'ascii'), length);
}

/** The broker password of a device provisioned from a root secret: 16 bytes as 32 lowercase hex characters. */
export function deriveBrokerPassword(rootSecret: string, deviceId: string, product: Product): string {
  return derive(rootSecret, deviceId, brokerPasswordLabel(product), 16).toString('hex');
}

/** The device's 32-byte settings key (the key of its `enc1:` values). */
export function deriveSettingsKey(rootSecret: string, deviceId: string, product: Product): Buffer {
  return derive(rootSecret, deviceId, settingsKeyLabel(product), 32);
}

/** Setting keys the firmware never shows or accepts in clear. */
export function isSecretSettingKey(key: string): boolean {
  return /pass|pwd|key|token|secret|psk/i.test(key);
}

/** A fresh root secret from the CSPRNG, uniform over the 94 allowed characters. */
export function generateRootSecret(): string {
  let out = '';
  for (let i = 0; i < 16; i++) out += String.fromCharCode(0x21 + randomInt(0x7e - 0x21 + 1));
  return out;
}

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** AES-256-GCM of `plaintext` with a fresh 12-byte nonce (or the given one); returns nonce || ciphertext || tag. */
export function aesGcmSeal(key: Buffer, plaintext: Buffer, aad: Buffer, nonce: Buffer = randomBytes(NONCE_BYTES)): Buffer {
  if (key.length !== 32) throw new Error('AES-256-GCM needs a 32-byte key');
  if (nonce.length !== NONCE_BYTES) throw new Error('AES-256-GCM nonce must be 12 bytes');
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([nonce, body, cipher.getAuthTag()]);
}

/** Opens nonce || ciphertext || tag; throws when the key, AAD or bytes do not match. */
export function aesGcmOpen(key: Buffer, sealed: Buffer, aad: Buffer): Buffer {
  if (sealed.length < NONCE_BYTES + TAG_BYTES) throw new Error('sealed value too short');
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, NONCE_BYTES), { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
  return Buffer.concat([decipher.update(sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
}

export const ENC1_PREFIX = 'enc1:';

/** The `enc1:` envelope of a secret setting value, bound to the device and key name (AAD `<device_id>|<key>`). */
export function sealSetting(settingsKey: Buffer, deviceId: string, key: string, value: string, nonce?: Buffer): string {
  const sealed = aesGcmSeal(settingsKey, Buffer.from(value, 'utf8'), Buffer.from(`${deviceId}|${key}`, 'ascii'), nonce);
  return `${ENC1_PREFIX}${sealed.toString('base64url')}`;
}

/** Opens an `enc1:` value (what a device does); throws when it was not sealed for this device and key. */
export function openSetting(settingsKey: Buffer, deviceId: string, key: string, envelope: string): string {
  if (!envelope.startsWith(ENC1_PREFIX)) throw new Error('not an enc1: value');
  const sealed = Buffer.from(envelope.slice(ENC1_PREFIX.length), 'base64url');
  return aesGcmOpen(settingsKey, sealed, Buffer.from(`${deviceId}|${key}`, 'ascii')).toString('utf8');
}
