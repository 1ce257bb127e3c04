/**
 * The page writer over the text a real Postgres sends (RECORD_JSON through the store's reads):
 * floats Postgres writes in another notation than JavaScript (exponents, -0), strings it
 * escapes, nulls, instants before 1970, must come out as the plain view would write them.
 */
import { randomDeviceId } from '@fleet/test-kit';
import { writeRecordPage } from '../src/domain/record-page';
import { listByStart, listUnknownTime } from '../src/store/records';
import { referencePage } from './reference-view';
import { createTestDb, type TestDb } from './support';

let t: TestDb;
const device = randomDeviceId();
// Each row: a float for every statistic and counter reading, a start (or null), a time quality.
const FLOATS = ['1e15', '-0', '1.5e-5', '2.5e-7', '1e21', '-3.25e17', '1e-300', '1.7976931348623157e308', '0.1', '230.123', '-45.5', '123456789.987654', '5e-324'];

beforeAll(async () => {
  t = await createTestDb();
  const rows = FLOATS.map((x, k) => {
    const start = k === FLOATS.length - 1 ? 'NULL' : `'${new Date(Date.UTC(1965 + k * 7, k, 3, k, 15, 0, k * 37)).toISOString()}'`;
    const f = `'${x}'::float8`;
    return `('${device}', 'ab${String(k).padStart(6, '0')}', ${k}, ${start}, ${k % 2 ? `'zeit "é" \\ ✓'` : "'synced'"}, 900, 900, ${k % 3},
      ${f}, ${f}, ${f}, ${f}, ${f}, ${f}, ${f}, ${f}, ${f}, ${f}, ${f}, ${f}, ${f}, ${f}, ${f}, ${f}, ${f},
      ${k % 4 === 0 ? 'NULL' : k % 4}, ${k}, ${k % 2 === 0}, ${k % 3 === 0}, false, ${k === 5}, ${k === 5 ? `'malformed_fields'` : 'NULL'}, '2026-06-01T12:00:05.123Z')`;
  });
  await t.db.$executeRawUnsafe(
    `INSERT INTO interval_records (device_id, sid, seq, start_at, time_quality, duration_s, reads_n, reads_err,
       v_avg, v_min, v_max, i_avg, i_min, i_max, p_avg, p_min, p_max, f_avg, f_min, f_max, pf_avg, pf_min, pf_max, e_first_raw, e_last_raw,
       ct_turns, alarm_reads, partial, energy_reset, meter_reconfigured, quarantined, quarantine_reason, received_at)
     VALUES ${rows.join(',\n')}`,
  );
});

afterAll(() => t?.drop());

const write = (text: string) => writeRecordPage(text, 100, { before: {}, after: () => ({}) });

it('writes what Postgres sends as the plain view of the same values would', async () => {
  const window = { start: new Date(Date.UTC(1900, 0, 1)), end: new Date(Date.UTC(2200, 0, 1)) };
  const text = await listByStart(t.db, device, window, null, 100);
  expect(text).toContain('e+15');
  expect(text).toContain(',-0,');
  const page = write(text);
  expect(page).toMatchObject({ count: FLOATS.length - 1, hasMore: false });
  expect(page.body.toString('utf8')).toBe(`{"records":${referencePage(text, 100)}}`);
  // Records before 1970 are listed at their instant.
  expect((JSON.parse(page.body.toString('utf8')) as { records: Array<{ start_at: string }> }).records[0]?.start_at).toBe('1965-01-03T00:15:00.000Z');

  const unknown = await listUnknownTime(t.db, device, null, 100);
  expect(write(unknown)).toMatchObject({ count: 1 });
  expect(write(unknown).body.toString('utf8')).toBe(`{"records":${referencePage(unknown, 100)}}`);
});
