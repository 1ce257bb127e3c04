/**
 * Two meter processes (the built service, dist/main.js) share the durable consumer; one is
 * killed with SIGKILL mid-stream. Every record is stored exactly once: nothing lost, nothing
 * doubled; and announced once on PARTNER_EVENTS (`meter.records_stored`), each event's cursor
 * and count listing exactly its records. On a nats-server of this file's own: the replicas'
 * relays create PARTNER_EVENTS, which no other test or fleet may see.
 * Needs the service built (`npm run build`, as `npm test` does).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PARTNER_EVENTS_STREAM, type Bus } from '@fleet/service-kit';
import { randomDeviceId, startPrivateNats, uniqueId, waitFor, type PrivateNats } from '@fleet/test-kit';
import { listIntervals } from '../src/handlers/reads';
import { bodyOf, connectBus, createStream, createTestDb, deviceSends, envelope, makeRecord, randomSid, type TestDb } from './support';

const MAIN = path.resolve(__dirname, '../dist/main.js');

let nats: PrivateNats;
let testDb: TestDb;
let bus: Bus;
let stream: Awaited<ReturnType<typeof createStream>>;
const children: ChildProcess[] = [];

beforeAll(async () => {
  if (!fs.existsSync(MAIN)) throw new Error(`${MAIN} is missing: build the meter service first (npm run build)`);
  nats = await startPrivateNats();
  testDb = await createTestDb();
  bus = await connectBus('meter-test', undefined, nats.url);
  stream = await createStream(bus.connection);
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await stream?.drop();
  await bus?.drain();
  await testDb?.drop();
  await nats?.stop();
});

interface RecordsStored {
  event: { type: string; device_id: string; data: { count: number; cursor: string } };
}

/** Every event PARTNER_EVENTS holds, read one by one by sequence. */
async function partnerEvents(): Promise<RecordsStored[]> {
  const jsm = await bus.connection.jetstreamManager();
  const { first_seq: first, last_seq: last, messages } = (await jsm.streams.info(PARTNER_EVENTS_STREAM)).state;
  const out: RecordsStored[] = [];
  for (let seq = first; messages > 0 && seq <= last; seq++) out.push((await jsm.streams.getMessage(PARTNER_EVENTS_STREAM, { seq })).json<RecordsStored>());
  return out;
}

function startReplica(durable: string): ChildProcess {
  const child = spawn(process.execPath, [MAIN], {
    env: {
      ...process.env,
      NATS_URL: nats.url,
      DATABASE_URL: testDb.url,
      HEALTH_PORT: '0',
      LOG_LEVEL: 'silent',
      SUBJECT_PREFIX: stream.prefix,
      DEVICE_IN_STREAM: stream.name,
      METER_CONSUMER: durable,
      INGEST_BATCH: '25',
      INGEST_ACK_WAIT_SECONDS: '3',
    },
    stdio: 'ignore',
  });
  children.push(child);
  return child;
}

it('loses and doubles nothing when one of two replicas is killed mid-stream', async () => {
  const durable = uniqueId('meter-replicas-');
  const a = startReplica(durable);
  startReplica(durable);
  const devices = [randomDeviceId(), randomDeviceId(), randomDeviceId()];
  const js = bus.connection.jetstream();
  const expected = new Set<string>();
  const t0 = Date.parse('2026-01-01T00:00:00Z') / 1000;
  const sends: Promise<void>[] = [];
  for (const dev of devices) {
    const sid = randomSid();
    for (let seq = 0; seq < 600; seq++) {
      const rec = makeRecord(sid, seq, t0 + seq * 900, { e0: 1000 + seq });
      expected.add(`${dev}/${sid}/${seq}`);
      sends.push(deviceSends(js, stream.prefix, dev, 'iv', rec));
      if (seq % 7 === 0) sends.push(deviceSends(js, stream.prefix, dev, 'iv', rec)); // duplicates
    }
  }
  await Promise.all(sends);
  // Kill one replica once some, but not all, records are stored.
  await waitFor(async () => (await testDb.db.intervalRecord.count()) > 200, { timeoutMs: 30_000, what: 'ingest to start' });
  a.kill('SIGKILL');
  const total = expected.size;
  await waitFor(async () => (await testDb.db.intervalRecord.count()) >= total, { timeoutMs: 60_000, intervalMs: 200, what: `${total} records` });
  await new Promise((r) => setTimeout(r, 4000)); // past the ack wait: any redelivery has landed
  const rows = await testDb.db.intervalRecord.findMany({ select: { deviceId: true, sid: true, seq: true } });
  const keys = rows.map((r) => `${r.deviceId}/${r.sid}/${r.seq}`);
  expect(keys).toHaveLength(total);
  expect(new Set(keys)).toEqual(expected);

  // Announced once each (the killed replica's uncommitted batch announced nothing), and each
  // event's cursor and count list exactly its records.
  await waitFor(async () => (await testDb.db.outboxEvent.count()) === 0, { timeoutMs: 15_000, what: 'the relays to empty the outbox' });
  const events = (await partnerEvents()).map((e) => e.event);
  expect(new Set(events.map((e) => e.type))).toEqual(new Set(['meter.records_stored']));
  expect(events.reduce((n, e) => n + e.data.count, 0)).toBe(total);
  const announced: string[] = [];
  for (const e of events) {
    const page = bodyOf(await listIntervals(testDb.db, envelope(e.device_id, { cursor: e.data.cursor, limit: String(e.data.count) }))) as unknown as { records: Array<{ sid: string; seq: number }> };
    expect(page.records).toHaveLength(e.data.count);
    announced.push(...page.records.map((r) => `${e.device_id}/${r.sid}/${r.seq}`));
  }
  expect(announced).toHaveLength(total);
  expect(new Set(announced)).toEqual(expected);
}, 120_000);
