/**
 * Device protocol v1 (docs/protocol.md) as the platform, the simulator and tests use it. The
 * known answers below pin the derivation labels and formats: a change to any of them breaks
 * every device in the field, so it must fail here first.
 */
import {
  ackLine,
  captureSubject,
  commandTopic,
  deriveBrokerPassword,
  deriveSettingsKey,
  deviceAcls,
  formatSysLine,
  generateRootSecret,
  hkdfSha256,
  isBrokerPassword,
  isDeviceId,
  isRootSecret,
  isSecretSettingKey,
  openSetting,
  levelsAfterDevice,
  TOPIC_ROOT_PATTERN,
  parseAcknowledgement,
  parseCaptureSubject,
  parseDeviceTopic,
  parseSysCommand,
  sealSetting,
  sysExeTopic,
} from '../src';

const ID = '0123456789AB';
const SECRET = 'Sim-Root-Secret!';
const roots = { light: 'light', meter: 'meter' };

describe('device ids and secrets', () => {
  it('takes 12 uppercase hex characters as a device id, nothing else', () => {
    expect([ID, 'ABCDEF012345'].every(isDeviceId)).toBe(true);
    expect(['0123456789ab', '0123456789A', '0123456789ABC', 'G123456789AB', '', 12, null].some(isDeviceId)).toBe(false);
  });

  it('takes 16 printable ASCII characters as a root secret and 32 lowercase hex as a broker password', () => {
    expect(isRootSecret(SECRET)).toBe(true);
    expect(['short', 'with space inside', 'Sim-Root-Secret!!', 'Sim-Root-Secrét!'].some(isRootSecret)).toBe(false);
    expect(isBrokerPassword('db6c3cf7bd61f3cfbe3fd356ed203488')).toBe(true);
    expect(isBrokerPassword('DB6C3CF7BD61F3CFBE3FD356ED203488')).toBe(false);
    for (let k = 0; k < 20; k++) expect(isRootSecret(generateRootSecret())).toBe(true);
  });
});

describe('HKDF derivations', () => {
  it('is RFC 5869 HKDF-SHA256 (test case 1)', () => {
    const okm = hkdfSha256(Buffer.alloc(22, 0x0b), Buffer.from('000102030405060708090a0b0c', 'hex'), Buffer.from('f0f1f2f3f4f5f6f7f8f9', 'hex'), 42);
    expect(okm.toString('hex')).toBe('3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865');
  });

  it('derives the broker password with <product>/mqtt/v1 and the settings key with <product>/settings/v1 (known answers)', () => {
    expect(deriveBrokerPassword(SECRET, ID, 'light')).toBe('db6c3cf7bd61f3cfbe3fd356ed203488');
    expect(deriveBrokerPassword(SECRET, ID, 'meter')).toBe('34ec858ab083ee0c95e22872935ccd72');
    expect(deriveBrokerPassword(SECRET, ID, 'light')).toBe(hkdfSha256(Buffer.from(SECRET), Buffer.from(ID), Buffer.from('light/mqtt/v1'), 16).toString('hex'));
    expect(deriveSettingsKey(SECRET, ID, 'light').toString('hex')).toBe('33814033d5cea6ae16047b9734ff41024a9d01b58bbae3b1bef3b853818038e3');
    expect(() => deriveBrokerPassword('short', ID, 'light')).toThrow(/root secret/);
    expect(() => deriveBrokerPassword(SECRET, 'nope', 'light')).toThrow(/device id/);
  });
});

describe('enc1 envelope', () => {
  const key = deriveSettingsKey(SECRET, ID, 'light');

  it('seals with AES-256-GCM bound to the device and key name (known answer), and opens it', () => {
    const sealed = sealSetting(key, ID, 'wifiPass', 'hunter2', Buffer.alloc(12, 7));
    expect(sealed).toBe('enc1:BwcHBwcHBwcHBwcHo5w-qShiG6UrZmNuNiX-XcAneQbP42E');
    expect(openSetting(key, ID, 'wifiPass', sealed)).toBe('hunter2');
    expect(() => openSetting(key, ID, 'mqttPass', sealed)).toThrow();
    expect(() => openSetting(key, 'ABCDEF012345', 'wifiPass', sealed)).toThrow();
  });

  it('names secret keys by pass, pwd, key, token, secret or psk in any case', () => {
    expect(['wifiPass', 'PWD', 'apiKey', 'Token', 'secret_x', 'wpa_psk'].every(isSecretSettingKey)).toBe(true);
    expect(['volume', 'ssid', 'name'].some(isSecretSettingKey)).toBe(false);
  });
});

describe('topics and DEVICE_IN subjects', () => {
  it('builds the platform-to-device topics', () => {
    expect(sysExeTopic('meter', ID)).toBe(`meter/${ID}/sys/exe`);
    expect(commandTopic('light', ID, 'light2')).toBe(`light/${ID}/cmd/light2`);
  });

  it('reads device topics of the known roots only', () => {
    expect(parseDeviceTopic(`light/${ID}/state/light1`, roots)).toEqual({ product: 'light', deviceId: ID, levels: ['state', 'light1'] });
    expect(parseDeviceTopic(`meter/${ID}/iv`, roots)).toEqual({ product: 'meter', deviceId: ID, levels: ['iv'] });
    for (const topic of [`other/${ID}/iv`, `meter/${ID}`, 'meter/0123456789ab/iv']) expect(parseDeviceTopic(topic, roots)).toBeUndefined();
    // Roots of several levels, one the prefix of the other: each topic finds its own product.
    const nested = { light: 'acme', meter: 'acme/meter' };
    expect(parseDeviceTopic(`acme/meter/${ID}/iv`, nested)).toEqual({ product: 'meter', deviceId: ID, levels: ['iv'] });
    expect(parseDeviceTopic(`acme/${ID}/status`, nested)).toEqual({ product: 'light', deviceId: ID, levels: ['status'] });
  });

  it('captures a topic as dev.<in|out>.<product>.<id>.<levels> and reads it back', () => {
    const subject = captureSubject('t1.', 'in', { product: 'light', deviceId: ID, levels: ['tele', 'heart.beat', ''] });
    expect(subject).toBe(`t1.dev.in.light.${ID}.tele.heart_beat._`);
    expect(parseCaptureSubject(subject, 't1.')).toEqual({ direction: 'in', product: 'light', deviceId: ID, tokens: ['tele', 'heart_beat', '_'] });
    for (const s of [`dev.up.light.${ID}.x`, `dev.in.fridge.${ID}.x`, `dev.in.light.${ID}`, 'dev.in.light.nope.x', `x.dev.in.light.${ID}.iv`]) expect(parseCaptureSubject(s)).toBeUndefined();
  });

  it('lets a device use only its own subtree', () => {
    expect(deviceAcls('light', ID)).toEqual(
      ['publishClientSend', 'publishClientReceive', 'subscribePattern', 'unsubscribePattern'].map((acltype) => ({ acltype, topic: `light/${ID}/#`, allow: true })),
    );
  });
});

describe('sys/exe lines', () => {
  it('formats lines and reads them back', () => {
    expect(formatSysLine('query')).toBe('query>');
    expect(formatSysLine('sample', [['token', 't1']])).toBe('sample>token=t1');
    expect(parseSysCommand('addfile>name=a.mp3;sha256=ab;url=https://x/y')).toMatchObject({ verb: 'addfile', args: [['name', 'a.mp3'], ['sha256', 'ab'], ['url', 'https://x/y']] });
  });

  it('acknowledges as the protocol says, and reads acknowledgements', () => {
    expect(ackLine('query>', 'ok')).toBe('query>ok');
    expect(ackLine('set>volume=5', 'ok')).toBe('set>volume=5>ok');
    expect(ackLine('addfile>name=a.mp3', 'failed', 'sha256 mismatch')).toBe('addfile>name=a.mp3>failed:sha256 mismatch');
    expect(parseAcknowledgement('query>ok')).toEqual({ verb: 'query', rawArgs: '', result: 'ok', reason: null });
    expect(parseAcknowledgement('set>volume=5>ok')).toEqual({ verb: 'set', rawArgs: 'volume=5', result: 'ok', reason: null });
    expect(parseAcknowledgement('resetenergy>>failed:unreadable token')).toEqual({ verb: 'resetenergy', rawArgs: '', result: 'failed', reason: 'unreadable token' });
    expect(parseAcknowledgement('log>booted')).toBeNull();
    expect(parseAcknowledgement('query>maybe')).toBeNull();
  });

  it('finds the levels after the device id under a root of any depth', () => {
    expect(levelsAfterDevice('light/0123456789AB/tele/heartbeat', '0123456789AB')).toEqual(['tele', 'heartbeat']);
    expect(levelsAfterDevice('acme/eu/light/0123456789AB/tdl/a.1', '0123456789AB')).toEqual(['tdl', 'a.1']);
    expect(levelsAfterDevice('0123456789AB/tele/x', '0123456789AB')).toBeUndefined();
    expect(levelsAfterDevice('light/0123456789AB', '0123456789AB')).toBeUndefined();
    expect(levelsAfterDevice('light/FFFFFFFFFFFF/tele/x', '0123456789AB')).toBeUndefined();
  });

  it('takes topic roots of one level or several, never empty levels, wildcards or spaces', () => {
    for (const root of ['light', 'acme/light', 'acme/eu/light', 'lamps.v1', 'em-2']) expect(TOPIC_ROOT_PATTERN.test(root)).toBe(true);
    for (const root of ['', '/light', 'light/', 'acme//light', 'light/+', '#', 'my light', 'a\tb']) expect(TOPIC_ROOT_PATTERN.test(root)).toBe(false);
  });

  it('reads an acknowledgement ended by a line terminator as the same acknowledgement', () => {
    for (const end of ['\n', '\r\n', '\r']) {
      expect(parseAcknowledgement(`query>ok${end}`)).toEqual({ verb: 'query', rawArgs: '', result: 'ok', reason: null });
      expect(parseAcknowledgement(`addfile>name=a.mp3>failed:sha256 mismatch${end}`)).toEqual({ verb: 'addfile', rawArgs: 'name=a.mp3', result: 'failed', reason: 'sha256 mismatch' });
    }
    expect(parseAcknowledgement('query>ok\nmore')).toBeNull();
  });
});
