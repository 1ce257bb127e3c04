import { hkdfSync } from 'node:crypto';
import {
  ackLine,
  deriveBrokerPassword,
  deriveSettingsKey,
  deviceIdsFromPrefix,
  isSecretSettingKey,
  ManualClock,
  openSetting,
  parseSysCommand,
  sealSetting,
  SimClock,
} from '@fleet/device-sim';
import { connectOptions, SESSION_NEVER_EXPIRES } from '../src/connection';

describe('credentials', () => {
  // Vectors computed independently (Python hmac/hashlib, HKDF written out per RFC 5869).
  it('derives the broker password by HKDF-SHA256 as device-protocol.md says', () => {
    expect(deriveBrokerPassword('abcdefghijklmnop', '0A0000000001', 'light')).toBe('8b3ab864a3dae5503be3ba457580fd27');
    expect(deriveBrokerPassword('R00t-Secret!2026', '0123456789AB', 'light')).toBe('f8832647c0cb8ba8324d4b6c48ec6457');
    expect(deriveBrokerPassword('R00t-Secret!2026', '0123456789AB', 'meter')).toBe('771083cc6900e10af61d7f37f00c78b5');
    expect(deriveSettingsKey('R00t-Secret!2026', '0123456789AB', 'meter').toString('hex')).toBe('3cf14f1a0c49969c9ed4c3b19b70ec6b5df8046579de8ec702ba42a25c31b145');
  });

  it('refuses malformed root secrets and device ids', () => {
    expect(() => deriveBrokerPassword('short', '0123456789AB', 'light')).toThrow(/root secret/);
    expect(() => deriveBrokerPassword('has space inside', '0123456789AB', 'light')).toThrow(/root secret/);
    expect(() => deriveBrokerPassword('R00t-Secret!2026', '0123456789ab', 'light')).toThrow(/device id/);
  });

  it('seals and opens enc1 setting values bound to device and key', () => {
    const key = deriveSettingsKey('R00t-Secret!2026', '0123456789AB', 'light');
    const sealed = sealSetting(key, '0123456789AB', 'wifi_pass', 's3cret');
    expect(sealed).toMatch(/^enc1:[A-Za-z0-9_-]+$/);
    expect(openSetting(key, '0123456789AB', 'wifi_pass', sealed)).toBe('s3cret');
    expect(() => openSetting(key, '0123456789AB', 'other_pass', sealed)).toThrow();
    // Independent check of the layout: nonce || ciphertext || tag, AAD "<id>|<key>".
    const raw = Buffer.from(sealed.slice(5), 'base64url');
    expect(raw.length).toBe(12 + 6 + 16);
    expect(isSecretSettingKey('API_Token')).toBe(true);
    expect(isSecretSettingKey('volume')).toBe(false);
    expect(hkdfSync).toBeDefined();
  });

  it('makes device ids from a prefix', () => {
    expect(deviceIdsFromPrefix('0a0000', 3, 254)).toEqual(['0A00000000FE', '0A00000000FF', '0A0000000100']);
    expect(() => deviceIdsFromPrefix('0A000000000', 17)).toThrow(/do not fit/);
  });
});

describe('system command grammar', () => {
  it('acknowledges the exact line without a trailing >', () => {
    expect(ackLine('query>', 'ok')).toBe('query>ok');
    expect(ackLine('set>volume=5', 'ok')).toBe('set>volume=5>ok');
    expect(ackLine('addfile>name=a.mp3;sha256=00;url=https://x', 'failed', 'sha256 mismatch')).toBe('addfile>name=a.mp3;sha256=00;url=https://x>failed:sha256 mismatch');
    expect(ackLine('frobnicate', 'unknown')).toBe('frobnicate>unknown');
  });

  it('parses verbs and k=v arguments', () => {
    const cmd = parseSysCommand('addfile>name=a.mp3;sha256=ab;url=https://h/p?q=1;xfer=t1');
    expect(cmd.verb).toBe('addfile');
    expect(cmd.args).toEqual([
      ['name', 'a.mp3'],
      ['sha256', 'ab'],
      ['url', 'https://h/p?q=1'],
      ['xfer', 't1'],
    ]);
    expect(parseSysCommand('query>').args).toEqual([]);
  });
});

describe('clocks', () => {
  it('runs a manual clock’s tasks in due order with now() at each due time', () => {
    const clock = new ManualClock(1_000_000);
    const seen: Array<[string, number]> = [];
    clock.at(1_003_000, () => seen.push(['c', clock.now()]));
    clock.at(1_001_000, () => {
      seen.push(['a', clock.now()]);
      clock.at(1_002_000, () => seen.push(['b', clock.now()]));
    });
    const cancelled = clock.at(1_001_500, () => seen.push(['x', clock.now()]));
    clock.cancel(cancelled);
    clock.advance(2_500);
    expect(seen).toEqual([
      ['a', 1_001_000],
      ['b', 1_002_000],
    ]);
    expect(clock.now()).toBe(1_002_500);
    clock.advance(1_000);
    expect(seen.map(([k]) => k)).toEqual(['a', 'b', 'c']);
  });

  it('accelerates real time and fires many tasks from one timer', async () => {
    const clock = new SimClock({ speed: 1000 });
    const start = clock.now();
    const fired: number[] = [];
    for (let k = 0; k < 500; k++) clock.at(start + 60_000 + k, () => fired.push(k));
    await new Promise((r) => setTimeout(r, 150)); // 150 real ms = 150 simulated s
    expect(fired.length).toBe(500);
    expect(fired).toEqual([...fired].sort((a, b) => a - b));
    expect(clock.now() - start).toBeGreaterThanOrEqual(150_000);
    clock.stop();
  });
});

describe('the CONNECT a device sends', () => {
  const base = 'light/0A0000000001';
  const opts = { deviceId: '0A0000000001', brokerUrl: 'mqtt://x' };

  it('keeps its session on either protocol version: clean off, and on MQTT 5 a session that outlives the connection', () => {
    const v4 = connectOptions({ ...opts, protocolVersion: 4 }, 'pw', base);
    expect([v4.clean, v4.protocolVersion, v4.properties]).toEqual([false, 4, undefined]);
    const v5 = connectOptions({ ...opts, protocolVersion: 5 }, 'pw', base);
    expect([v5.clean, v5.protocolVersion, v5.properties?.sessionExpiryInterval]).toEqual([false, 5, SESSION_NEVER_EXPIRES]);
    const tidy = connectOptions({ ...opts, protocolVersion: 5, sessionExpirySec: 10 }, 'pw', base);
    expect(tidy.properties?.sessionExpiryInterval).toBe(10);
    expect(v5.will).toMatchObject({ topic: `${base}/status`, qos: 1, retain: true });
  });
});
