import { createServer, type Socket } from 'node:net';
import { randomDeviceId } from '@fleet/test-kit';
import { deriveBrokerPassword, deriveSettingsKey, LIGHT_CHANNELS, ManualClock, sealSetting, SimulatedLight, type MqttProbe } from '@fleet/device-sim';
import { BROKER, cleanup, openProbe, ROOT_SECRET, TIDY, uniqueRoot } from './helpers';

const root = uniqueRoot('light');
let probe: MqttProbe;
const running: SimulatedLight[] = [];

function light(extra: Partial<ConstructorParameters<typeof SimulatedLight>[0]> = {}): SimulatedLight {
  const d = new SimulatedLight({ brokerUrl: BROKER, deviceId: randomDeviceId(), rootSecret: ROOT_SECRET, topicRoot: root, ...TIDY, ...extra });
  running.push(d);
  return d;
}

/** Publishes a command line to the device and resolves with its next sys/resp line. */
async function exe(d: SimulatedLight, line: string): Promise<string> {
  const reply = probe.next((m) => m.topic === `${d.base}/sys/resp` && !m.text.startsWith('log>'), 5000, `ack of ${line}`);
  await probe.publish(`${d.base}/sys/exe`, line, { qos: 2 });
  return (await reply).text;
}

beforeAll(async () => {
  probe = await openProbe(root);
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((d) => d.stop().catch(() => undefined)));
});
afterAll(async () => {
  await cleanup(root, probe);
});

describe('SimulatedLight', () => {
  it('connects as its device id with the derived password, publishes online (retained) and sys/settings', async () => {
    const d = light();
    expect(d.brokerPassword).toBe(deriveBrokerPassword(ROOT_SECRET, d.deviceId, 'light'));
    await d.start();
    const online = await probe.waitFor((m) => m.topic === `${d.base}/status` && m.text === 'online');
    expect(online.qos).toBe(1);
    const settings = JSON.parse((await probe.waitFor((m) => m.topic === `${d.base}/sys/settings`)).text);
    expect(settings).toMatchObject({ fw_ver: expect.any(String), enc: true, wifi_pass: '*****', volume: 50 });
    expect(settings.file_list).toEqual([{ name: 'chime.mp3', size: 48213 }]);
    // A late subscriber sees the retained online status.
    const late = await openProbe(root);
    try {
      const retained = await late.waitFor((m) => m.topic === `${d.base}/status`);
      expect([retained.text, retained.retain]).toEqual(['online', true]);
    } finally {
      await late.close();
    }
  });

  it('lets the broker publish the offline will when its socket dies, and says offline itself on a clean stop', async () => {
    const d = light();
    await d.start();
    await probe.waitFor((m) => m.topic === `${d.base}/status` && m.text === 'online');
    const will = probe.next((m) => m.topic === `${d.base}/status` && m.text === 'offline', 5000, 'will');
    await d.kill();
    expect((await will).qos).toBe(1);
    expect(d.sent.filter((m) => m.sub === 'status').map((m) => m.payload.toString())).toEqual(['online']);

    const e = light();
    await e.start();
    await probe.waitFor((m) => m.topic === `${e.base}/status` && m.text === 'online');
    const bye = probe.next((m) => m.topic === `${e.base}/status` && m.text === 'offline');
    await e.stop();
    await bye;
    expect(e.sent.filter((m) => m.sub === 'status').map((m) => m.payload.toString())).toEqual(['online', 'offline']);
  });

  it('drops the will on purpose with dropWillOnDisconnect (abrupt stop)', async () => {
    const d = light({ dropWillOnDisconnect: true });
    await d.start();
    await probe.waitFor((m) => m.topic === `${d.base}/status` && m.text === 'online');
    const will = probe.next((m) => m.topic === `${d.base}/status` && m.text === 'offline');
    await d.stop();
    await will;
    expect(d.sent.some((m) => m.sub === 'status' && m.payload.toString() === 'offline')).toBe(false);
  });

  it('echoes every cmd/<channel> on state/<channel> retained, off and stop as the empty string', async () => {
    const d = light();
    await d.start();
    await probe.waitFor((m) => m.topic === `${d.base}/sys/settings`);
    const payloads: Record<string, string> = {
      light1: 'pulse:00FF00,1000',
      light2: 'chase:FF0000,500,3@5000/60000',
      light3: 'solid:0000FF',
      sound: 'play:chime.mp3,80,2',
      contact: 'pulse:500',
    };
    for (const ch of LIGHT_CHANNELS) {
      const state = probe.next((m) => m.topic === `${d.base}/state/${ch}`);
      await probe.publish(`${d.base}/cmd/${ch}`, payloads[ch]!, { qos: 1 });
      const got = await state;
      expect([got.text, got.retain, got.qos]).toEqual([payloads[ch], false, 1]);
      expect(d.channels[ch]).toBe(payloads[ch]);
    }
    // Byte for byte what the device received.
    expect(d.received.filter((m) => m.sub.startsWith('cmd/')).map((m) => [m.sub, m.payload.toString()])).toEqual(LIGHT_CHANNELS.map((ch) => [`cmd/${ch}`, payloads[ch]]));
    expect(d.sent.find((m) => m.sub === 'state/light1')?.retain).toBe(true);
    for (const [ch, idle] of [['light1', 'off'], ['sound', 'stop'], ['contact', 'off']] as const) {
      const state = probe.next((m) => m.topic === `${d.base}/state/${ch}`);
      await probe.publish(`${d.base}/cmd/${ch}`, idle, { qos: 1 });
      expect((await state).text).toBe('');
      expect(d.channels[ch]).toBe('');
    }
  });

  it('goes idle on its own after a one-shot: a contact pulse, an overlay played once', async () => {
    const clock = new ManualClock(Date.UTC(2026, 11, 2, 9, 0, 0));
    const d = light({ clock });
    await d.start();
    await probe.waitFor((m) => m.topic === `${d.base}/sys/settings`);
    const command = async (ch: string, payload: string) => {
      const state = probe.next((m) => m.topic === `${d.base}/state/${ch}`);
      await probe.publish(`${d.base}/cmd/${ch}`, payload, { qos: 1 });
      expect((await state).text).toBe(payload);
    };
    await command('contact', 'pulse:500');
    await command('light2', 'chase:FF0000,500,3@5000/0');
    await command('light3', 'solid:0000FF@5000/60000');
    const contactIdle = probe.next((m) => m.topic === `${d.base}/state/contact`);
    clock.advance(500);
    expect([(await contactIdle).text, (await contactIdle).retain]).toEqual(['', false]);
    const overlayIdle = probe.next((m) => m.topic === `${d.base}/state/light2`);
    clock.advance(4500);
    expect((await overlayIdle).text).toBe('');
    // An overlay that repeats, and a one-shot replaced before it ended, stay as they are.
    await command('contact', 'pulse:1000');
    await command('contact', 'on');
    clock.advance(60_000);
    expect([d.channels.light3, d.channels.contact, d.channels.light2]).toEqual(['solid:0000FF@5000/60000', 'on', '']);
    expect(d.sent.filter((m) => m.sub === 'state/contact').map((m) => m.payload.toString())).toEqual(['pulse:500', '', 'pulse:1000', 'on']);
  });

  it('acknowledges every common verb exactly per the grammar', async () => {
    const d = light();
    await d.start();
    await probe.waitFor((m) => m.topic === `${d.base}/sys/settings`);
    const sha = 'ab'.repeat(32);
    const cases: Array<[string, string]> = [
      ['query>', 'query>ok'],
      ['set>volume=5', 'set>volume=5>ok'],
      ['set>a=1;b=2', 'set>a=1;b=2>failed:bad arguments'],
      [`addfile>name=alert.mp3;sha256=${sha};url=https://files.example/alert.mp3;xfer=tr_1`, `addfile>name=alert.mp3;sha256=${sha};url=https://files.example/alert.mp3;xfer=tr_1>ok`],
      [`setcert>name=ca.pem;sha256=${sha};url=https://files.example/ca.pem`, `setcert>name=ca.pem;sha256=${sha};url=https://files.example/ca.pem>ok`],
      ['rmfile>name=alert.mp3', 'rmfile>name=alert.mp3>ok'],
      ['rmfile>name=nothing.mp3', 'rmfile>name=nothing.mp3>failed:no such file'],
      [`ota_update>name=fw-9.bin;sha256=${sha};url=https://files.example/fw-9.bin`, `ota_update>name=fw-9.bin;sha256=${sha};url=https://files.example/fw-9.bin>failed:signature invalid`],
      ['formatfs>', 'formatfs>ok'],
      ['clearsettings>', 'clearsettings>ok'],
      ['report>', 'report>unknown'],
      ['frobnicate>x=1', 'frobnicate>x=1>unknown'],
      ['garbage', 'garbage>unknown'],
    ];
    for (const [line, ack] of cases) expect(await exe(d, line)).toBe(ack);
    expect(d.received.filter((m) => m.sub === 'sys/exe').map((m) => m.payload.toString())).toEqual(cases.map(([line]) => line));
  });

  it('keeps a set pending until reboot; reboot acks, reconnects and reports the new value', async () => {
    const d = light();
    await d.start();
    await probe.waitFor((m) => m.topic === `${d.base}/sys/settings`);
    expect(await exe(d, 'set>volume=7')).toBe('set>volume=7>ok');
    expect(d.pendingSettings).toEqual({ volume: 7 });
    const queried = probe.next((m) => m.topic === `${d.base}/sys/settings`);
    expect(await exe(d, 'query>')).toBe('query>ok');
    expect(JSON.parse((await queried).text).volume).toBe(50);

    const will = probe.next((m) => m.topic === `${d.base}/status` && m.text === 'offline');
    const back = probe.next((m) => m.topic === `${d.base}/sys/settings`, 5000, 'settings after reboot');
    expect(await exe(d, 'reboot>')).toBe('reboot>ok');
    await will;
    expect(JSON.parse((await back).text).volume).toBe(7);
    expect(d.boots).toBe(2);
  });

  it('opens enc1 secret settings with its settings key and refuses clear or forged ones', async () => {
    const d = light();
    await d.start();
    await probe.waitFor((m) => m.topic === `${d.base}/sys/settings`);
    const key = deriveSettingsKey(ROOT_SECRET, d.deviceId, 'light');
    const sealed = sealSetting(key, d.deviceId, 'wifi_pass', 'n3w-pass');
    expect(await exe(d, `set>wifi_pass=${sealed}`)).toBe(`set>wifi_pass=${sealed}>ok`);
    expect(d.pendingSettings.wifi_pass).toBe('n3w-pass');
    expect(await exe(d, 'set>wifi_pass=plain')).toBe('set>wifi_pass=plain>failed:secret not encrypted');
    const forged = sealSetting(key, d.deviceId, 'other_key', 'x');
    expect(await exe(d, `set>wifi_pass=${forged}`)).toBe(`set>wifi_pass=${forged}>failed:decrypt failed`);
  });

  it('refuses verbs with failed:<reason> when told to, and sends nothing at all when silent', async () => {
    const d = light({ refuse: true, refuseReason: 'busy' });
    await d.start();
    await probe.waitFor((m) => m.topic === `${d.base}/sys/settings`);
    expect(await exe(d, 'query>')).toBe('query>failed:busy');
    expect(await exe(d, 'set>volume=1')).toBe('set>volume=1>failed:busy');
    expect(await exe(d, 'nope>')).toBe('nope>unknown');

    const s = light({ silent: true });
    await s.start();
    await probe.publish(`${s.base}/sys/exe`, 'query>', { qos: 2 });
    await probe.publish(`${s.base}/cmd/light1`, 'solid:FF0000', { qos: 1 });
    await s.waitFor('received', (m) => m.sub === 'cmd/light1');
    await new Promise((r) => setTimeout(r, 200));
    expect(probe.messages.filter((m) => m.topic.startsWith(`${s.base}/`) && !m.topic.endsWith('/sys/exe') && !m.topic.includes('/cmd/'))).toEqual([]);
    expect(s.sent).toEqual([]);
  });

  it('sends log> lines when asked, and acknowledges immediate settings with applied', async () => {
    const d = light({ logLines: true, immediateKeys: ['volume'] });
    await d.start();
    await probe.waitFor((m) => m.topic === `${d.base}/sys/resp` && m.text === `log>boot fw=${d.fwVersion} reason=power_on`);
    expect(await exe(d, 'set>volume=9')).toBe('set>volume=9>applied');
    expect(d.activeSettings.volume).toBe(9);
    expect(d.pendingSettings).toEqual({});
  });

  it('forgets its credentials on factory_reset and cannot start again', async () => {
    const d = light();
    await d.start();
    await probe.waitFor((m) => m.topic === `${d.base}/sys/settings`);
    const gone = new Promise((r) => d.once('factory_reset', r));
    expect(await exe(d, 'factory_reset>')).toBe('factory_reset>ok');
    await gone;
    expect(d.brokerPassword).toBeUndefined();
    await expect(d.start()).rejects.toThrow(/no broker credentials/);
  });

  it('sends heartbeats and tdl sensor readings on the accelerated schedule', async () => {
    const d = light({ speed: 600, heartbeatSec: 300, sensors: [{ tdlId: 'tdl-1', periodSec: 60, tempC: 9.5 }] });
    await d.start();
    const hb = JSON.parse((await probe.waitFor((m) => m.topic === `${d.base}/tele/heartbeat`, 3000)).text);
    expect(hb).toEqual({ uptime_s: expect.any(Number), rssi_dbm: expect.any(Number), heap_free: expect.any(Number) });
    expect(Number.isInteger(hb.uptime_s) && hb.uptime_s >= 0).toBe(true);
    const readings = await probe.waitForCount((m) => m.topic === `${d.base}/tdl/tdl-1`, 3, 3000);
    const parsed = readings.map((m) => JSON.parse(m.text));
    for (const r of parsed) {
      expect(Object.keys(r).sort()).toEqual(['at', 'breach', 'humidity', 'temp_c']);
      expect(r.breach).toBe(r.temp_c > 8);
    }
    // Readings 60 simulated seconds apart.
    expect(parsed[1].at - parsed[0].at).toBeGreaterThanOrEqual(59);
    expect(parsed[1].at - parsed[0].at).toBeLessThanOrEqual(61);
  });

  it('stops relaying a silenced sensor and resumes when it is back', async () => {
    const d = light({ speed: 600, sensors: [{ tdlId: 'quiet', periodSec: 60 }, { tdlId: 'loud', periodSec: 60 }] });
    await d.start();
    await probe.waitForCount((m) => m.topic === `${d.base}/tdl/quiet`, 1, 3000);
    d.setSensorSilent('quiet', true);
    // Let any reading already handed to the client land before counting.
    const loudBefore = probe.messages.filter((m) => m.topic === `${d.base}/tdl/loud`).length;
    await probe.waitForCount((m) => m.topic === `${d.base}/tdl/loud`, loudBefore + 1, 3000);
    const quietAt = probe.messages.filter((m) => m.topic === `${d.base}/tdl/quiet`).length;
    await probe.waitForCount((m) => m.topic === `${d.base}/tdl/loud`, loudBefore + 4, 5000);
    expect(probe.messages.filter((m) => m.topic === `${d.base}/tdl/quiet`).length).toBe(quietAt);
    d.setSensorSilent('quiet', false);
    await probe.waitForCount((m) => m.topic === `${d.base}/tdl/quiet`, quietAt + 1, 3000);
  });

  it('gives up a start that has not connected yet when stopped', async () => {
    // A "broker" that accepts the TCP connection and never answers CONNECT.
    const sockets: Socket[] = [];
    const mute = createServer((sock) => sockets.push(sock));
    await new Promise<void>((r) => mute.listen(0, '127.0.0.1', r));
    const { port } = mute.address() as { port: number };
    const d = new SimulatedLight({ brokerUrl: `mqtt://127.0.0.1:${port}`, deviceId: randomDeviceId(), rootSecret: ROOT_SECRET });
    const starting = d.start();
    await new Promise((r) => setTimeout(r, 100));
    expect(d.state).toBe('connecting');
    await d.stop();
    await expect(starting).rejects.toThrow(/stopped before connecting/);
    for (const sock of sockets) sock.destroy();
    await new Promise((r) => mute.close(r));
  });

  it('works over MQTT 3.1.1 with a persistent session, getting commands sent while it was away', async () => {
    const d = light({ protocolVersion: 4, sessionExpirySec: undefined, password: deriveBrokerPassword(ROOT_SECRET, 'ABCDEF000000', 'light'), rootSecret: undefined, deviceId: `ABCDEF${randomDeviceId().slice(6)}` });
    await d.start();
    await probe.waitFor((m) => m.topic === `${d.base}/sys/settings`);
    await d.kill();
    await probe.publish(`${d.base}/sys/exe`, 'query>', { qos: 2 });
    await d.start();
    await d.waitFor('received', (m) => m.sub === 'sys/exe', 5000);
    await probe.waitFor((m) => m.topic === `${d.base}/sys/resp` && m.text === 'query>ok');
    // Tidy: end the persistent session.
    await d.stop();
    const { connectAsync } = await import('mqtt');
    const c = await connectAsync(BROKER, { clientId: d.deviceId, clean: true });
    await c.endAsync();
  });
});
