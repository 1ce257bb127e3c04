import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { deriveBrokerPassword, MqttProbe } from '@fleet/device-sim';
import { BROKER, cleanup, ROOT_SECRET, uniqueRoot } from './helpers';

/** The CLI, compiled from the current sources into a scratch folder (never a stale dist/). */
const pkg = resolve(__dirname, '..');
const out = join(pkg, 'node_modules', '.cache', `cli-test-${randomBytes(4).toString('hex')}`);
const cli = join(out, 'cli.js');
const root = uniqueRoot('cli');

function run(args: string[]): string {
  return execFileSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
}

beforeAll(() => {
  mkdirSync(out, { recursive: true });
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(pkg, 'tsconfig.build.json'), '--outDir', out, '--declaration', 'false', '--sourceMap', 'false']);
}, 60_000);

afterAll(async () => {
  rmSync(out, { recursive: true, force: true });
  await cleanup(root);
});

describe('fleet-sim CLI', () => {
  it('prints ids and broker passwords', () => {
    expect(run(['ids', '--id-prefix', '0a0000', '--count', '2', '--start-index', '15'])).toBe('0A000000000F\n0A0000000010\n');
    expect(run(['password', '--product', 'meter', '--root-secret', ROOT_SECRET, '--ids', '0123456789AB'])).toBe(`0123456789AB ${deriveBrokerPassword(ROOT_SECRET, '0123456789AB', 'meter')}\n`);
  });

  it('runs devices, prints status lines, and shuts down cleanly on SIGINT', async () => {
    const probe = await MqttProbe.open(BROKER, [`${root}/#`]);
    const prefix = randomBytes(3).toString('hex').toUpperCase();
    const passwords = join(out, 'devices.json');
    // Half the devices from a password file with root secrets, to cover that path too.
    writeFileSync(passwords, JSON.stringify(Array.from({ length: 20 }, (_, k) => ({ device_id: `${prefix}${k.toString(16).toUpperCase().padStart(6, '0')}`, root_secret: ROOT_SECRET }))));
    const child = spawn(process.execPath, [cli, '--broker', BROKER, '--product', 'meter', '--password-file', passwords, '--speed', '900', '--topic-root', root, '--status-every', '0.5', '--protocol', '5', '--session-expiry', '10'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stdout += b.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      await probe.waitForCount((m) => m.topic.endsWith('/status') && m.text === 'online', 20, 10_000);
      await probe.waitForCount((m) => m.topic.endsWith('/iv'), 20, 10_000);
      await new Promise((r) => setTimeout(r, 700));
      expect(stdout).toMatch(/connected 20\/20 in/);
      expect(stdout).toMatch(/running t=\d+s meter connected=20\/20 .*records=\d+/);
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
    expect(stdout).toMatch(/SIGINT: stopping 20 devices/);
    expect(stdout).toMatch(/stopped .* connected=0\/20/);
    const offline = probe.messages.filter((m) => m.topic.endsWith('/status') && m.text === 'offline');
    expect(offline.length).toBe(20);
    await probe.close();
  }, 30_000);

  it('relays sensor readings around the configured values from every light', async () => {
    const probe = await MqttProbe.open(BROKER, [`${root}/+/tdl/#`]);
    const prefix = randomBytes(3).toString('hex').toUpperCase();
    const args = ['--broker', BROKER, '--product', 'light', '--id-prefix', prefix, '--count', '2', '--root-secret', ROOT_SECRET, '--topic-root', root, '--speed', '600'];
    const child = spawn(process.execPath, [cli, ...args, '--sensors', '2', '--sensor-period', '60', '--sensor-temp', '12', '--sensor-humidity', 'none', '--sensor-breach-above', '10'], { stdio: 'ignore' });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      const readings = await probe.waitForCount((m) => /\/tdl\/[0-9A-F]{12}-t[12]$/.test(m.topic), 8, 10_000);
      expect(new Set(readings.map((m) => m.topic)).size).toBe(4);
      for (const m of readings) {
        const r = JSON.parse(m.text);
        expect(r.temp_c).toBeGreaterThan(10);
        expect(r.temp_c).toBeLessThan(14);
        expect(r.humidity).toBeNull();
        expect(r.breach).toBe(true);
      }
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
    await probe.close();
  }, 30_000);

  it('exits non-zero with a usage message on bad arguments', () => {
    expect(() => execFileSync(process.execPath, [cli, '--broker', BROKER, '--product', 'lamp', '--count', '1', '--root-secret', ROOT_SECRET], { stdio: 'pipe' })).toThrow(/--product must be light or meter/);
    expect(() => execFileSync(process.execPath, [cli, '--broker', BROKER, '--count', '1', '--id-prefix', 'AB', '--root-secret', ROOT_SECRET, '--sensors', '1', '--sensor-temp', 'warm'], { stdio: 'pipe' })).toThrow(
      /--sensor-temp must be a number or "none"/,
    );
  });
});
