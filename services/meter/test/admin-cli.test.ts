/** `npm run -s admin -- meter clear --device <id>`: the built CLI against a database of its own. */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { randomDeviceId } from '@fleet/test-kit';
import { parseAdminArgs } from '../src/admin/cli';
import { ingestRecords } from '../src/store/ingest';
import { parseRecord } from '../src/domain/record';
import { createTestDb, makeRecord, randomSid, type TestDb } from './support';

const CLI = path.resolve(__dirname, '../dist/admin/cli.js');
let testDb: TestDb;

beforeAll(async () => {
  testDb = await createTestDb();
});
afterAll(async () => {
  await testDb?.drop();
});

describe('meter admin arguments', () => {
  it('reads clear --device and refuses anything else', () => {
    expect(parseAdminArgs(['meter', 'clear', '--device', '0123456789AB'])).toEqual({ command: 'clear', deviceId: '0123456789AB' });
    expect(parseAdminArgs(['meter', 'clear', '--device=0123456789AB'])).toEqual({ command: 'clear', deviceId: '0123456789AB' });
    expect(() => parseAdminArgs(['meter', 'clear'])).toThrow('--device');
    expect(() => parseAdminArgs(['meter', 'clear', '--device', 'lowercase12ab'])).toThrow('--device');
    expect(() => parseAdminArgs(['meter', 'wipe', '--device', '0123456789AB'])).toThrow('usage');
    expect(() => parseAdminArgs(['meter', 'clear', '--device', '0123456789AB', '--all'])).toThrow("unknown option '--all'");
  });
});

describe('meter clear', () => {
  it('clears every record of the device received so far and says how many', async () => {
    if (!fs.existsSync(CLI)) throw new Error(`${CLI} is missing: build the meter service first (npm run build)`);
    const dev = randomDeviceId();
    const other = randomDeviceId();
    const sid = randomSid();
    const t0 = Math.floor(Date.now() / 1000) - 86_400;
    const records = [0, 1, 2].map((s) => parseRecord(dev, Buffer.from(JSON.stringify(makeRecord(sid, s, t0 + s * 900))), new Date()));
    await ingestRecords(testDb.db, [...records, parseRecord(other, Buffer.from(JSON.stringify(makeRecord(sid, 0, t0))), new Date())]);
    const run = spawnSync(process.execPath, [CLI, 'meter', 'clear', '--device', dev], { env: { ...process.env, DATABASE_URL: testDb.url }, encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ device_id: dev, cleared_records: 3, cleared_at: expect.any(String) });
    expect(await testDb.db.intervalRecord.count({ where: { deviceId: dev, cleared: false } })).toBe(0);
    expect(await testDb.db.intervalRecord.count({ where: { deviceId: other, cleared: false } })).toBe(1);
    const bad = spawnSync(process.execPath, [CLI, 'meter', 'clear'], { env: { ...process.env, DATABASE_URL: testDb.url }, encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('--device');
  });
});
