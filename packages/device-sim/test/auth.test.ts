import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@fleet/launcher';
import { randomDeviceId } from '@fleet/test-kit';
import { deriveBrokerPassword, MqttProbe, SimulatedLight, SimulatedMeter } from '@fleet/device-sim';
import { ROOT_SECRET } from './helpers';

/**
 * Against a private Mosquitto that checks passwords and ACLs, as the fleet's broker does:
 * the derived password authenticates, a wrong secret is refused, and the device stays in
 * its own subtree.
 */
const dir = mkdtempSync(join(tmpdir(), 'device-sim-auth-'));
// Mosquitto started as root drops to its own user, which must be able to read these files.
chmodSync(dir, 0o755);
let broker: ChildProcess;
let url: string;
const light = randomDeviceId();
const meter = randomDeviceId();

beforeAll(async () => {
  const port = await freePort();
  url = `mqtt://127.0.0.1:${port}`;
  const passwd = join(dir, 'passwd');
  execFileSync('mosquitto_passwd', ['-b', '-c', passwd, light, deriveBrokerPassword(ROOT_SECRET, light, 'light')]);
  execFileSync('mosquitto_passwd', ['-b', passwd, meter, deriveBrokerPassword(ROOT_SECRET, meter, 'meter')]);
  execFileSync('mosquitto_passwd', ['-b', passwd, 'platform', 'platform-pass']);
  writeFileSync(join(dir, 'acl'), 'user platform\ntopic readwrite #\n\npattern readwrite light/%u/#\npattern readwrite meter/%u/#\n');
  writeFileSync(
    join(dir, 'mosquitto.conf'),
    `listener ${port} 127.0.0.1\nallow_anonymous false\npassword_file ${passwd}\nacl_file ${join(dir, 'acl')}\npersistence false\nlog_dest none\n`,
  );
  for (const f of ['passwd', 'acl', 'mosquitto.conf']) chmodSync(join(dir, f), 0o644);
  broker = spawn('/usr/sbin/mosquitto', ['-c', join(dir, 'mosquitto.conf')], { stdio: 'ignore' });
  for (let k = 0; k < 50; k++) {
    try {
      const p = await MqttProbe.open(url, [], { username: 'platform', password: 'platform-pass' });
      await p.close();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error('private mosquitto did not start');
});

afterAll(() => {
  broker?.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

describe('credentials at a broker that checks them', () => {
  it('connects lights and meters with the password derived from the root secret', async () => {
    const probe = await MqttProbe.open(url, ['light/#', 'meter/#'], { username: 'platform', password: 'platform-pass' });
    const l = new SimulatedLight({ brokerUrl: url, deviceId: light, rootSecret: ROOT_SECRET });
    const m = new SimulatedMeter({ brokerUrl: url, deviceId: meter, rootSecret: ROOT_SECRET });
    try {
      await l.start();
      await m.start();
      await probe.waitFor((x) => x.topic === `light/${light}/status` && x.text === 'online');
      await probe.waitFor((x) => x.topic === `meter/${meter}/sys/settings`);
      const ack = probe.next((x) => x.topic === `meter/${meter}/sys/resp`);
      await probe.publish(`meter/${meter}/sys/exe`, 'query>', { qos: 2 });
      expect((await ack).text).toBe('query>ok');
    } finally {
      await l.stop();
      await m.stop();
      await probe.close();
    }
  });

  it('is refused with a wrong root secret or the other product’s label', async () => {
    const wrong = new SimulatedLight({ brokerUrl: url, deviceId: light, rootSecret: 'Wrong-Secret-123', reconnectMs: 0 });
    await expect(wrong.start()).rejects.toThrow(/Not authorized|Bad User Name or Password/i);
    // The meter's password is derived with meter/mqtt/v1; a light derivation does not fit.
    const mislabelled = new SimulatedLight({ brokerUrl: url, deviceId: meter, rootSecret: ROOT_SECRET, topicRoot: 'meter', reconnectMs: 0 });
    await expect(mislabelled.start()).rejects.toThrow(/Not authorized|Bad User Name or Password/i);
    expect(wrong.state).toBe('stopped');
  });
});
