/**
 * The metrics query (store/evaluation.ts summarizeSensors) on real Postgres: each sensor's window
 * summarized as the README defines it, including a sensor whose readings all lie before the
 * window and one that never sent any.
 */
import { randomDeviceId } from '@fleet/test-kit';
import { attachSensor } from '../src/store/devices';
import { summarizeSensors } from '../src/store/evaluation';
import { storeReadings } from '../src/store/readings';
import { createTestDb, type TestDb } from './support';

let testDb: TestDb;

beforeAll(async () => {
  testDb = await createTestDb();
});

afterAll(async () => {
  await testDb?.drop();
});

const now = new Date('2026-11-25T12:00:00Z');
const since = new Date(now.getTime() - 3_600_000);
const minutesAgo = (m: number) => new Date(now.getTime() - m * 60_000);

it('summarizes the window per sensor: counts, the newest run of breaches, extremes and the newest reading', async () => {
  const deviceId = randomDeviceId();
  const other = randomDeviceId();
  for (const [d, tdlId] of [
    [deviceId, 'fridge:1'],
    [deviceId, 'freezer:1'],
    [deviceId, 'door'],
    [other, 'fridge:1'],
  ] as const) {
    await attachSensor(testDb.db, { deviceId: d, tdlId, profileId: null, label: null });
  }
  const reading = (tdlId: string, m: number, tempC: number | null, breach: boolean, humidity: number | null = 40) => ({
    deviceId,
    tdlId,
    at: minutesAgo(m),
    tempC,
    humidity,
    breach,
    receivedAt: minutesAgo(m),
  });
  await storeReadings(testDb.db, [
    // Before the window: never counted, and not the newest.
    reading('fridge:1', 90, 20, true),
    // In the window, oldest to newest: ok, breach, ok, breach, breach (a run of two).
    reading('fridge:1', 50, 3, false),
    reading('fridge:1', 40, 9, true),
    reading('fridge:1', 30, -1, false),
    reading('fridge:1', 20, 8.5, true),
    reading('fridge:1', 10, null, true, 55),
    // Only before the window: nothing counted, yet its newest reading is known.
    reading('freezer:1', 120, -18, false, null),
    reading('freezer:1', 75, -17, false, 30),
  ]);

  const byId = new Map((await summarizeSensors(testDb.db, [deviceId], since)).map((s) => [s.tdlId, s]));
  expect([...byId.keys()].sort()).toEqual(['door', 'freezer:1', 'fridge:1']);
  expect(byId.get('fridge:1')).toEqual({
    deviceId,
    tdlId: 'fridge:1',
    profileId: null,
    level: null,
    count: 5,
    breaches: 3,
    consecutiveBreaches: 2,
    minTempC: -1,
    maxTempC: 9,
    newest: { at: minutesAgo(10), breach: true, tempC: null, humidity: 55 },
  });
  expect(byId.get('freezer:1')).toMatchObject({
    count: 0,
    breaches: 0,
    consecutiveBreaches: 0,
    minTempC: null,
    maxTempC: null,
    newest: { at: minutesAgo(75), breach: false, tempC: -17, humidity: 30 },
  });
  expect(byId.get('door')).toMatchObject({ count: 0, consecutiveBreaches: 0, newest: null });
});

it('counts every reading of a run when the whole window breaches', async () => {
  const deviceId = randomDeviceId();
  await attachSensor(testDb.db, { deviceId, tdlId: 'probe', profileId: null, label: null });
  await storeReadings(
    testDb.db,
    [45, 30, 15].map((m) => ({ deviceId, tdlId: 'probe', at: minutesAgo(m), tempC: 12, humidity: null, breach: true, receivedAt: now })),
  );
  const [summary] = await summarizeSensors(testDb.db, [deviceId], since);
  expect(summary).toMatchObject({ count: 3, breaches: 3, consecutiveBreaches: 3, newest: { at: minutesAgo(15), breach: true, tempC: 12, humidity: null } });
});

it('reads the window from the key alone: the key carries the columns the metrics need', async () => {
  // Prisma's schema cannot express INCLUDE, so a migration generated from it would drop them.
  const [key] = await testDb.db.$queryRaw<Array<{ def: string }>>`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'readings_pkey'`;
  expect(key?.def).toBe('PRIMARY KEY (device_id, tdl_id, at) INCLUDE (breach, temp_c, humidity)');
});
