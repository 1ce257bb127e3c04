/**
 * Two meter processes (the built service, dist/main.js) share the durable consumer; one is
 * killed with SIGKILL mid-stream. Every record is stored exactly once: nothing lost, nothing doubled.
 * Needs the service built (`npm run build`, as `npm test` does).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Bus } from '@fleet/service-kit';
import { randomDeviceId, testEnv, uniqueId, waitFor } from '@fleet/test-kit';
import { connectBus, createStream, createTestDb, deviceSends, makeRecord, randomSid, type TestDb } from './support';

const MAIN = path.resolve(__dirname, '../dist/main.js');

let testDb: TestDb;
let bus: Bus;
let stream: Awaited<ReturnType<typeof createStream>>;
const children: ChildProcess[] = [];

beforeAll(async () => {
  if (!fs.existsSync(MAIN)) throw new Error(`${MAIN} is missing: build the meter service first (npm run build)`);
  testDb = await createTestDb();
  bus = await connectBus();
  stream = await createStream(bus.connection);
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await stream?.drop();
  await bus?.drain();
  await testDb?.drop();
});

function startReplica(durable: string): ChildProcess {
  const child = spawn(process.execPath, [MAIN], {
    env: {
      ...process.env,
      NATS_URL: testEnv.natsUrl,
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
}, 120_000);
