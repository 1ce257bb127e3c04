import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { platformIdentity, readRegistryConfig, settingsKek } from '../src/config';

describe('configuration', () => {
  it('has the documented defaults', () => {
    const c = readRegistryConfig({});
    expect(c).toMatchObject({
      DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/fleet_device_registry',
      HEALTH_PORT: 9101,
      CONNECTIVITY_SILENCE_SECONDS: 1500,
      CONNECTIVITY_STREAM: 'DEVICE_EVENTS',
      CONNECTIVITY_CONSUMER: 'registry-connectivity',
      TELEMETRY_STREAM: 'DEVICE_IN',
      TELEMETRY_CONSUMER: 'registry-telemetry',
      TELEMETRY_FILTER: 'dev.in.*.*.tele.>',
      TELEMETRY_RETENTION_DAYS: 30,
    });
  });

  it('keeps broker credentials in dynamic security with no hook unless told, and needs the platform password for a hook', () => {
    expect(readRegistryConfig({})).toMatchObject({ BROKER_CREDENTIALS: 'dynsec', BROKER_HOOK_PORT: 0, BROKER_HOOK_CACHE_MS: 1000, LIGHT_TOPIC_ROOT: 'light', METER_TOPIC_ROOT: 'meter' });
    expect(() => readRegistryConfig({ BROKER_CREDENTIALS: 'hook' })).toThrow(/BROKER_PLATFORM_PASSWORD/);
    expect(() => readRegistryConfig({ BROKER_HOOK_PORT: '9111' })).toThrow(/BROKER_PLATFORM_PASSWORD/);
    expect(() => readRegistryConfig({ BROKER_HOOK_CACHE_MS: '5000' })).toThrow();
    // The platform identity is mqtt-bridge's own unless set apart.
    expect(platformIdentity(readRegistryConfig({ BROKER_HOOK_PORT: '9111', MQTT_ADMIN_USERNAME: 'admin', MQTT_ADMIN_PASSWORD: 'a-pw' }))).toEqual({ username: 'admin', password: 'a-pw' });
    expect(platformIdentity(readRegistryConfig({ BROKER_CREDENTIALS: 'hook', MQTT_ADMIN_PASSWORD: 'a-pw', BROKER_PLATFORM_USERNAME: 'p', BROKER_PLATFORM_PASSWORD: 'p-pw' }))).toEqual({ username: 'p', password: 'p-pw' });
  });

  it('takes the settings key-encryption key from the environment and refuses a bad one', () => {
    const key = randomBytes(32);
    expect(settingsKek(readRegistryConfig({ SETTINGS_KEY_ENCRYPTION_KEY: key.toString('base64') })).equals(key)).toBe(true);
    expect(() => settingsKek(readRegistryConfig({ SETTINGS_KEY_ENCRYPTION_KEY: randomBytes(16).toString('base64') }))).toThrow(/32 bytes/);
  });

  it('refuses to start in production without a key', () => {
    expect(() => settingsKek(readRegistryConfig({ NODE_ENV: 'production' }))).toThrow(/required in production/);
  });

  it('outside production generates a key once, mode 0600, and reuses it', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'registry-kek-'));
    try {
      const file = path.join(dir, 'nested', 'kek');
      const first = settingsKek(readRegistryConfig({ SETTINGS_KEY_FILE: file }));
      expect(first).toHaveLength(32);
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      expect(settingsKek(readRegistryConfig({ SETTINGS_KEY_FILE: file })).equals(first)).toBe(true);
      expect(fs.readdirSync(path.dirname(file))).toEqual(['kek']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
