import { createCipheriv, createHmac, randomBytes } from 'node:crypto';
import {
  decryptSettingsKey,
  deriveBrokerPassword,
  deriveSettingsKey,
  encryptSettingsKey,
  generateRootSecret,
  hkdfSha256,
  isSecretSettingKey,
  openSetting,
  sealSetting,
} from '../src/domain/crypto';
import { isRootSecret } from '@fleet/device-protocol';

/** HKDF-SHA256 written out with HMAC (RFC 5869 section 2), independent of the code under test. */
function referenceHkdf(ikm: Buffer, salt: Buffer, info: Buffer, length: number): Buffer {
  const prk = createHmac('sha256', salt).update(ikm).digest();
  const blocks: Buffer[] = [];
  let previous = Buffer.alloc(0);
  for (let i = 1; Buffer.concat(blocks).length < length; i++) {
    previous = createHmac('sha256', prk).update(Buffer.concat([previous, info, Buffer.from([i])])).digest();
    blocks.push(previous);
  }
  return Buffer.concat(blocks).subarray(0, length);
}

const hex = (s: string): Buffer => Buffer.from(s, 'hex');

describe('HKDF-SHA256', () => {
  it('matches RFC 5869 test case 1', () => {
    const okm = hkdfSha256(hex('0b'.repeat(22)), hex('000102030405060708090a0b0c'), hex('f0f1f2f3f4f5f6f7f8f9'), 42);
    expect(okm.toString('hex')).toBe('3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865');
  });

  it('matches RFC 5869 test case 3 (empty salt and info)', () => {
    const okm = hkdfSha256(hex('0b'.repeat(22)), Buffer.alloc(0), Buffer.alloc(0), 42);
    expect(okm.toString('hex')).toBe('8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8');
  });

  it('agrees with the HMAC-written reference on random inputs', () => {
    for (let i = 0; i < 20; i++) {
      const ikm = randomBytes(16);
      const salt = randomBytes(12);
      const info = randomBytes(i);
      expect(hkdfSha256(ikm, salt, info, 48).equals(referenceHkdf(ikm, salt, info, 48))).toBe(true);
    }
  });
});

describe('device credentials (device-protocol.md Connecting)', () => {
  const rootSecret = 'Rt0!secret#Key42';
  const deviceId = '0123456789AB';

  it('derives the broker password: 16 bytes of HKDF(root secret, salt device id, info <product>/mqtt/v1) as lowercase hex', () => {
    // Vectors computed outside Node (Python hmac/hashlib).
    expect(deriveBrokerPassword(rootSecret, deviceId, 'light')).toBe('7b0a60c109639929e6aebb550d526498');
    expect(deriveBrokerPassword(rootSecret, deviceId, 'meter')).toBe('d09ef0eafc7256698e9a99b0f6b03583');
    const expected = referenceHkdf(Buffer.from(rootSecret, 'ascii'), Buffer.from(deviceId, 'ascii'), Buffer.from('light/mqtt/v1'), 16).toString('hex');
    expect(deriveBrokerPassword(rootSecret, deviceId, 'light')).toBe(expected);
    expect(deriveBrokerPassword(rootSecret, deviceId, 'light')).toMatch(/^[0-9a-f]{32}$/);
    expect(deriveBrokerPassword(rootSecret, 'BA9876543210', 'light')).not.toBe(expected);
  });

  it('derives the 32-byte settings key with info <product>/settings/v1', () => {
    expect(deriveSettingsKey(rootSecret, deviceId, 'light').toString('hex')).toBe('a7852797933ccc703471a47d8b341ce8391bd4db30a9ae7b0f6dd8a4f05b7f85');
    expect(deriveSettingsKey(rootSecret, deviceId, 'meter').toString('hex')).toBe('b8445cd54459a68a6c5560d03e7b035f32422f7a2116692eb57f0ca46a411ee2');
  });

  it('generates 16 printable non-whitespace ASCII characters, different every time', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const s = generateRootSecret();
      expect(s).toMatch(/^[\x21-\x7E]{16}$/);
      expect(isRootSecret(s)).toBe(true);
      seen.add(s);
    }
    expect(seen.size).toBe(200);
    expect(isRootSecret('has a space in it')).toBe(false);
    expect(isRootSecret('short')).toBe(false);
  });
});

describe('enc1: envelope', () => {
  const deviceId = '0123456789AB';
  const settingsKey = hex('a7852797933ccc703471a47d8b341ce8391bd4db30a9ae7b0f6dd8a4f05b7f85');
  const nonce = Buffer.from(Array.from({ length: 12 }, (_, i) => i));

  it('matches a vector computed with another AES-GCM implementation (Python cryptography)', () => {
    expect(sealSetting(settingsKey, deviceId, 'wifiPass', 'hunter2', nonce)).toBe('enc1:AAECAwQFBgcICQoLo9DJiI9k2Bb-zBm0gv6XcNDJ5_zHs20');
  });

  it('is base64url without padding of nonce || AES-256-GCM ciphertext || tag, AAD <device_id>|<key>', () => {
    const value = 'correct horse battery staple';
    const sealed = sealSetting(settingsKey, deviceId, 'mqttPass', value, nonce);
    const cipher = createCipheriv('aes-256-gcm', settingsKey, nonce);
    cipher.setAAD(Buffer.from(`${deviceId}|mqttPass`));
    const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
    const expected = Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    expect(sealed).toBe(`enc1:${expected}`);
    expect(sealed).toMatch(/^enc1:[A-Za-z0-9_-]+$/);
  });

  it('uses a fresh nonce per value and opens only for the same device and key', () => {
    const a = sealSetting(settingsKey, deviceId, 'apiToken', 's3cret');
    const b = sealSetting(settingsKey, deviceId, 'apiToken', 's3cret');
    expect(a).not.toBe(b);
    expect(openSetting(settingsKey, deviceId, 'apiToken', a)).toBe('s3cret');
    expect(() => openSetting(settingsKey, deviceId, 'otherKey', a)).toThrow();
    expect(() => openSetting(settingsKey, 'BA9876543210', 'apiToken', a)).toThrow();
    expect(() => openSetting(randomBytes(32), deviceId, 'apiToken', a)).toThrow();
  });

  it('recognises secret keys by name', () => {
    for (const k of ['mqttPass', 'wifi_pwd', 'apiKey', 'TOKEN', 'clientSecret', 'wpaPsk']) expect(isSecretSettingKey(k)).toBe(true);
    for (const k of ['volume', 'host', 'tlsMode']) expect(isSecretSettingKey(k)).toBe(false);
  });
});

describe('settings key at rest', () => {
  it('round-trips with the key-encryption key and refuses another key or another device', () => {
    const kek = randomBytes(32);
    const settingsKey = randomBytes(32);
    const stored = encryptSettingsKey(kek, '0123456789AB', settingsKey);
    expect(stored).toMatch(/^v1\.[A-Za-z0-9_-]+$/);
    expect(stored).not.toContain(settingsKey.toString('base64url'));
    expect(decryptSettingsKey(kek, '0123456789AB', stored).equals(settingsKey)).toBe(true);
    expect(() => decryptSettingsKey(randomBytes(32), '0123456789AB', stored)).toThrow();
    expect(() => decryptSettingsKey(kek, 'BA9876543210', stored)).toThrow();
  });
});
