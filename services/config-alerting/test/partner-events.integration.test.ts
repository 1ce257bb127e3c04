/**
 * config-alerting's partner events on a private nats-server and a real Postgres: an evaluation
 * cycle that changes a light's alert level writes one alert.level_changed event (from, to, the
 * sensors it evaluated) in the transaction that stores the level; a cycle that changes nothing,
 * a second replica, a late replica and a rolled-back transaction write none; the relay moves the
 * events to PARTNER_EVENTS. Cycles run on a clock of the test's own, one period per step, so
 * each step is exactly one cycle (the light1 writes go to the light-command stand-in).
 */
import { DeliverPolicy } from 'nats';
import { LightClient } from '@fleet/light-client';
import { RegistryClient } from '@fleet/registry-client';
import { PARTNER_EVENTS_STREAM, partnerEventsRelay, type Bus, type OutboxRelay } from '@fleet/service-kit';
import { LightStandIn, randomDeviceId, RegistryStandIn, waitFor } from '@fleet/test-kit';
import { attachSensor, detachSensor, forgetDevice } from '../src/store/devices';
import { recordLevelChanges, saveDeviceLevels } from '../src/store/evaluation';
import { EvaluationCycle } from '../src/use-cases/evaluation-cycle';
import { connectBus, createTestDb, logger, startPrivateNats, type PrivateNats, type TestDb } from './support';

const PERIOD_MS = 120_000;
const MINUTE = 60_000;

let nats: PrivateNats;
let testDb: TestDb;
let bus: Bus;
let registry: RegistryStandIn;
let lights: LightStandIn;
/** The cycles' clock: a new cycle at each step. */
let clock = Math.floor(Date.now() / PERIOD_MS) * PERIOD_MS + 1_000;

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  bus = await connectBus(nats.url);
  registry = new RegistryStandIn(bus.connection);
  lights = new LightStandIn(bus.connection);
});

afterAll(async () => {
  registry?.close();
  lights?.close();
  await bus?.drain();
  await testDb?.drop();
  await nats?.stop();
});

const replica = (owner: string) =>
  new EvaluationCycle({
    db: testDb.db,
    lights: new LightClient(bus, { timeoutMs: 1000, logger }),
    registry: new RegistryClient(bus, { timeoutMs: 1000, logger }),
    logger,
    owner,
    now: () => new Date(clock),
    settings: { periodMs: PERIOD_MS, shards: 4, leaseMs: 60_000, windowMs: 3_600_000, retentionMs: 86_400_000, callTimeoutMs: 1000 },
  });

/** One more cycle, evaluated by the replicas given (at once). */
async function nextCycle(...replicas: EvaluationCycle[]): Promise<void> {
  clock += PERIOD_MS;
  await Promise.all((replicas.length > 0 ? replicas : [replica('replica-a')]).map((r) => r.runOnce()));
}

/** A light the registry knows (with automation on). */
const known = (deviceId: string) =>
  registry.described.set(deviceId, { device_id: deviceId, product: 'light', name: null, org_node: { id: 1, parent_id: null, name: 'Root' }, automation_enabled: true });

async function attach(deviceId: string, ...tdlIds: string[]): Promise<void> {
  known(deviceId);
  for (const tdlId of tdlIds) await testDb.db.sensor.create({ data: { deviceId, tdlId } });
}

/** A reading taken `agoMs` before the clock. */
async function reading(deviceId: string, tdlId: string, r: { tempC: number | null; humidity?: number | null; breach: boolean; agoMs?: number }): Promise<Date> {
  const at = new Date(clock - (r.agoMs ?? MINUTE));
  await testDb.db.reading.create({ data: { deviceId, tdlId, at, tempC: r.tempC, humidity: r.humidity ?? null, breach: r.breach, receivedAt: at } });
  return at;
}

interface EventRow {
  subject: string;
  type: unknown;
  device_id: unknown;
  occurred_at: unknown;
  data: { from: string | null; to: string | null; sensors: Array<Record<string, unknown>> };
}

/** The outbox's partner events of a light, oldest first. */
async function eventsOf(deviceId: string): Promise<EventRow[]> {
  const rows = await testDb.db.outboxEvent.findMany({ orderBy: { id: 'asc' } });
  return rows
    .map((r) => ({ subject: r.subject, event: (r.payload as { event: Record<string, unknown> }).event }))
    .filter((r) => r.event.device_id === deviceId)
    .map((r) => ({ subject: r.subject, type: r.event.type, device_id: r.event.device_id, occurred_at: r.event.occurred_at, data: r.event.data as EventRow['data'] }));
}

const levelOf = async (deviceId: string) => (await testDb.db.alertState.findUnique({ where: { deviceId } }))?.level ?? null;

const noReadings = { latest_at: null, reading_count: 0, newest_age_secs: null, latest_breach: null, consecutive_breaches: 0, breaches_in_window: 0, latest_temp_c: null, latest_humidity: null, min_temp_c: null, max_temp_c: null };

it('writes alert.level_changed when a light’s level changes, with the sensors the cycle evaluated, and nothing while it stays', async () => {
  const id = randomDeviceId();
  await attach(id, 'probe.b', 'probe.a');
  const firstAt = await reading(id, 'probe.a', { tempC: 4.5, humidity: 61, breach: false });

  await nextCycle();
  expect(await levelOf(id)).toBe('INSUFFICENT_DATA');
  const first = await eventsOf(id);
  expect(first).toEqual([
    {
      subject: 'evt.partner.alert.level_changed.v1',
      type: 'alert.level_changed',
      device_id: id,
      occurred_at: new Date(clock).toISOString(),
      data: {
        from: null,
        to: 'INSUFFICENT_DATA',
        sensors: [
          {
            tdl_id: 'probe.a',
            profile_id: null,
            level: 'CLEAR',
            latest_at: firstAt.toISOString(),
            reading_count: 1,
            // Taken a minute before the step's clock, evaluated a period later.
            newest_age_secs: 180,
            latest_breach: false,
            consecutive_breaches: 0,
            breaches_in_window: 0,
            latest_temp_c: 4.5,
            latest_humidity: 61,
            min_temp_c: 4.5,
            max_temp_c: 4.5,
          },
          { tdl_id: 'probe.b', profile_id: null, level: 'INSUFFICENT_DATA', ...noReadings },
        ],
      },
    },
  ]);

  // The same level again: nothing. A breach: ADVISORY.
  await nextCycle();
  expect(await eventsOf(id)).toEqual(first);
  await reading(id, 'probe.a', { tempC: 9, breach: true });
  await nextCycle();
  expect(await levelOf(id)).toBe('ADVISORY');
  // A sensor's level moving, or a sensor detached, under a light's level that holds: nothing.
  await reading(id, 'probe.b', { tempC: 3, breach: false });
  await nextCycle();
  expect((await testDb.db.sensor.findUniqueOrThrow({ where: { deviceId_tdlId: { deviceId: id, tdlId: 'probe.b' } } })).level).toBe('CLEAR');
  await testDb.db.sensor.delete({ where: { deviceId_tdlId: { deviceId: id, tdlId: 'probe.b' } } });
  await nextCycle();
  expect(await levelOf(id)).toBe('ADVISORY');
  const events = await eventsOf(id);
  expect(events.map((e) => [e.data.from, e.data.to, e.data.sensors.map((s) => [s.tdl_id, s.level])])).toEqual([
    [null, 'INSUFFICENT_DATA', [['probe.a', 'CLEAR'], ['probe.b', 'INSUFFICENT_DATA']]],
    ['INSUFFICENT_DATA', 'ADVISORY', [['probe.a', 'ADVISORY'], ['probe.b', 'INSUFFICENT_DATA']]],
  ]);
  expect(events[1]?.data.sensors[0]).toMatchObject({ latest_breach: true, latest_temp_c: 9, reading_count: 2, breaches_in_window: 1, consecutive_breaches: 1 });

  // The last sensor detached: NO_SENSORS, with no sensor to report.
  await testDb.db.sensor.deleteMany({ where: { deviceId: id } });
  await nextCycle();
  expect((await eventsOf(id)).at(-1)?.data).toEqual({ from: 'ADVISORY', to: 'NO_SENSORS', sensors: [] });
  expect(await eventsOf(id)).toHaveLength(3);
});

describe('a light whose only sensor was detached before any cycle evaluated it', () => {
  // The default signal's NO_DATA entry (pulsing blue, 2 s) as light1's wire payload.
  const NO_DATA = 'pulse:0000FF,2000';
  const sensor = (deviceId: string) => ({ deviceId, tdlId: 'probe', profileId: null, label: null });

  it('is NO_SENSORS at the next cycle, announced and written to light1 as a light that lost its sensor after evaluation', async () => {
    const early = randomDeviceId();
    const late = randomDeviceId();
    known(early);
    known(late);
    // `late` is evaluated with its sensor; `early` is attached and detached between two cycles.
    await attachSensor(testDb.db, sensor(late));
    await nextCycle();
    expect(await levelOf(late)).toBe('INSUFFICENT_DATA');
    await attachSensor(testDb.db, sensor(early));
    await detachSensor(testDb.db, early, 'probe');
    await detachSensor(testDb.db, late, 'probe');
    expect(await levelOf(early)).toBeNull();

    await nextCycle();
    expect(await levelOf(early)).toBe('NO_SENSORS');
    expect(await levelOf(late)).toBe('NO_SENSORS');
    expect((await eventsOf(early)).map((e) => e.data)).toEqual([{ from: null, to: 'NO_SENSORS', sensors: [] }]);
    expect((await eventsOf(late)).map((e) => e.data)).toEqual([
      { from: null, to: 'INSUFFICENT_DATA', sensors: [expect.objectContaining({ tdl_id: 'probe', level: 'INSUFFICENT_DATA' })] },
      { from: 'INSUFFICENT_DATA', to: 'NO_SENSORS', sensors: [] },
    ]);
    expect(lights.writesTo(early)).toEqual([NO_DATA]);
    expect(lights.writesTo(late).at(-1)).toBe(NO_DATA);
    // The pending marks are cleared: the alert states keep both among the lights evaluated.
    expect(await testDb.db.pendingLight.count({ where: { deviceId: { in: [early, late] } } })).toBe(0);

    // From then on it is one of the lights every cycle evaluates, and a level that holds says nothing more.
    await nextCycle();
    const state = await testDb.db.alertState.findUniqueOrThrow({ where: { deviceId: early } });
    expect({ level: state.level, evaluations: state.evaluations, writeNeeded: state.writeNeeded, writtenPayload: state.writtenPayload }).toEqual({
      level: 'NO_SENSORS',
      evaluations: 2,
      writeNeeded: false,
      writtenPayload: NO_DATA,
    });
    expect(await eventsOf(early)).toHaveLength(1);
    // Nothing else is written; light1 may be written the same entry again in its hourly slot.
    expect(new Set(lights.writesTo(early))).toEqual(new Set([NO_DATA]));

    // A sensor attached again is evaluated as any.
    await attachSensor(testDb.db, sensor(early));
    await nextCycle();
    expect((await eventsOf(early)).map((e) => [e.data.from, e.data.to])).toEqual([
      [null, 'NO_SENSORS'],
      ['NO_SENSORS', 'INSUFFICENT_DATA'],
    ]);
  });

  it('is forgotten, not judged, when the device is removed before the cycle', async () => {
    const id = randomDeviceId();
    known(id);
    await attachSensor(testDb.db, sensor(id));
    await detachSensor(testDb.db, id, 'probe');
    await testDb.db.$transaction((tx) => forgetDevice(tx, id, new Date()));
    await nextCycle();
    expect(await levelOf(id)).toBeNull();
    expect(await eventsOf(id)).toEqual([]);
    expect(lights.writesTo(id)).toEqual([]);
  });
});

it('writes each change once when two replicas share the cycle, and none for a replica late with an earlier cycle', async () => {
  const ids = Array.from({ length: 8 }, () => randomDeviceId());
  for (const id of ids) await attach(id, 't');
  const a = replica('replica-a');
  const b = replica('replica-b');
  await nextCycle(a, b);
  for (const id of ids) await reading(id, 't', { tempC: 3, breach: false });
  await nextCycle(a, b);
  await nextCycle(a, b);
  for (const id of ids) {
    expect((await eventsOf(id)).map((e) => [e.data.from, e.data.to])).toEqual([
      [null, 'INSUFFICENT_DATA'],
      ['INSUFFICENT_DATA', 'CLEAR'],
    ]);
  }
  // A replica that evaluated an earlier cycle commits its levels late: nothing changes, nothing is announced.
  const late = BigInt(Math.floor(clock / PERIOD_MS)) - 2n;
  const changed = await testDb.db.$transaction(async (tx) => {
    const changes = await saveDeviceLevels(tx, late, ids.map((deviceId) => ({ deviceId, level: 'WARNING' })), new Date(clock));
    await recordLevelChanges(tx, changes, () => [], new Date(clock));
    return changes;
  });
  expect(changed).toEqual([]);
  for (const id of ids) {
    expect(await levelOf(id)).toBe('CLEAR');
    expect(await eventsOf(id)).toHaveLength(2);
  }
});

it('leaves no event when the transaction that stored the level rolls back', async () => {
  const id = randomDeviceId();
  await attach(id, 't');
  await nextCycle();
  const cycle = BigInt(Math.floor((clock + PERIOD_MS) / PERIOD_MS));
  await expect(
    testDb.db.$transaction(async (tx) => {
      const changes = await saveDeviceLevels(tx, cycle, [{ deviceId: id, level: 'WARNING' }], new Date(clock));
      expect(changes).toEqual([{ deviceId: id, from: 'INSUFFICENT_DATA', to: 'WARNING' }]);
      await recordLevelChanges(tx, changes, () => [{ tdl_id: 't' }], new Date(clock));
      throw new Error('rolled back');
    }),
  ).rejects.toThrow('rolled back');
  expect(await levelOf(id)).toBe('INSUFFICENT_DATA');
  expect((await eventsOf(id)).map((e) => e.data.to)).toEqual(['INSUFFICENT_DATA']);
});

describe('the relay', () => {
  let relay: OutboxRelay | undefined;
  afterAll(async () => relay?.stop());

  it('puts the events on PARTNER_EVENTS in commit order', async () => {
    const id = randomDeviceId();
    await attach(id, 't');
    await nextCycle();
    await reading(id, 't', { tempC: 12, breach: true });
    await nextCycle();
    const waiting = await testDb.db.outboxEvent.findMany({ orderBy: { id: 'asc' } });
    expect((await eventsOf(id)).map((e) => e.data.to)).toEqual(['INSUFFICENT_DATA', 'ADVISORY']);

    relay = partnerEventsRelay(testDb.db, bus.connection, logger, { pollIntervalMs: 100 });
    relay.start();
    await waitFor(async () => (await testDb.db.outboxEvent.count()) === 0, { timeoutMs: 15_000, what: 'the outbox to empty' });
    const jsm = await bus.connection.jetstreamManager();
    const count = (await jsm.streams.info(PARTNER_EVENTS_STREAM)).state.messages;
    expect(count).toBe(waiting.length);
    const consumer = await bus.connection.jetstream().consumers.get(PARTNER_EVENTS_STREAM, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: 1 });
    const stored: Array<{ subject: string; payload: unknown; msgId: string | undefined }> = [];
    for await (const m of await consumer.fetch({ max_messages: count, expires: 5_000 })) {
      stored.push({ subject: m.subject, payload: m.json(), msgId: m.headers?.get('Nats-Msg-Id') });
      if (stored.length === count) break;
    }
    expect(stored).toEqual(waiting.map((e) => ({ subject: e.subject, payload: e.payload, msgId: e.msgId })));
  });
});
