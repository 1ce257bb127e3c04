import { aesGcmOpen, aesGcmSeal } from '@fleet/device-protocol';

/**
 * The device credential and secret-setting cryptography of device protocol v1 comes from
 * @fleet/device-protocol; what is the registry's own is how it keeps a device's settings key
 * at rest.
 */
export {
  deriveBrokerPassword,
  deriveSettingsKey,
  ENC1_PREFIX,
  generateRootSecret,
  hkdfSha256,
  isSecretSettingKey,
  openSetting,
  sealSetting,
} from '@fleet/device-protocol';

/**
 * At-rest form of a device's settings key: `v1.` + base64url(nonce || AES-256-GCM(KEK, key) || tag),
 * with AAD `settings-key|<device_id>` so a ciphertext cannot be moved to another device's row.
 */
export function encryptSettingsKey(kek: Buffer, deviceId: string, settingsKey: Buffer): string {
  return `v1.${aesGcmSeal(kek, settingsKey, Buffer.from(`settings-key|${deviceId}`, 'ascii')).toString('base64url')}`;
}

export function decryptSettingsKey(kek: Buffer, deviceId: string, stored: string): Buffer {
  if (!stored.startsWith('v1.')) throw new Error('unknown settings key format');
  return aesGcmOpen(kek, Buffer.from(stored.slice(3), 'base64url'), Buffer.from(`settings-key|${deviceId}`, 'ascii'));
}
