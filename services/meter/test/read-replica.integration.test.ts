/**
 * Where the meter's queries read with DATABASE_READ_URL set: pages by start time, summaries and
 * energy from the read database, arrival pages (bookmarks) from the primary. Two real databases
 * stand for the primary and its replica; each holds different records, so an answer shows
 * which one it came from.
 */
import type { HandlerContext } from '@fleet/service-kit';
import { randomDeviceId } from '@fleet/test-kit';
import { meterParts, readMeterConfig } from '../src/config';
import { parseRecord } from '../src/domain/record';
import { meterHandlers } from '../src/handlers/serve';
import { ingestRecords } from '../src/store/ingest';
import { openMeterReader } from '../src/store/prisma';
import { bodyOf as body, createTestDb, envelope, logger, makeRecord, randomSid, type TestDb } from './support';

const T0 = Date.UTC(2026, 0, 5) / 1000;
const RECEIVED = new Date(Date.UTC(2026, 0, 6));
let primary: TestDb;
let replica: TestDb;
let replicaReader: ReturnType<typeof openMeterReader>;
const device = randomDeviceId();

beforeAll(async () => {
  [primary, replica] = await Promise.all([createTestDb(), createTestDb()]);
  const sid = randomSid();
  const records = (seqs: number[]) => seqs.map((seq) => parseRecord(device, Buffer.from(JSON.stringify(makeRecord(sid, seq, T0 + seq * 900))), RECEIVED));
  await ingestRecords(primary.db, records([0, 1, 2]));
  await ingestRecords(replica.db, records([0]));
});

afterAll(async () => {
  await replicaReader?.close();
  await Promise.all([primary?.drop(), replica?.drop()]);
});

const ctx: HandlerContext = { logger, deadline: Date.now() + 60_000, remainingMs: () => 60_000, beforeCommit: async () => undefined };

it('reads pages by start time, summaries and energy from the read database, arrival pages from the primary', async () => {
  // As main.ts serves them: the prepared reader on DATABASE_READ_URL.
  replicaReader = openMeterReader(replica.url, 2);
  const handlers = meterHandlers({ db: primary.db, readDb: replicaReader } as unknown as Parameters<typeof meterHandlers>[0]);
  const window = { start: new Date((T0 - 60) * 1000).toISOString(), end: new Date((T0 + 3 * 900) * 1000).toISOString() };
  const byStart = body(await handlers['meter.interval.list'](envelope(device, window), ctx));
  expect((byStart.records as unknown[]).length).toBe(1);
  const byArrival = body(await handlers['meter.interval.list'](envelope(device, { received_since: '2000-01-01T00:00:00Z' }), ctx));
  expect((byArrival.records as unknown[]).length).toBe(3);
  const summary = body(await handlers['meter.summary.get'](envelope(device, window), ctx));
  expect(summary.coverage).toMatchObject({ records: 1 });
  const energy = body(await handlers['meter.energy.get'](envelope(device, { ...window, bucket: 'hour' }), ctx));
  expect((energy.total as { intervals: number }).intervals).toBe(1);

  // Without a read database every query reads the primary.
  const single = meterHandlers({ db: primary.db } as Parameters<typeof meterHandlers>[0]);
  expect((body(await single['meter.interval.list'](envelope(device, window), ctx)).records as unknown[]).length).toBe(3);
});

it('runs ingest, queries or both by METER_ROLE (default both)', () => {
  expect(meterParts(readMeterConfig({}))).toEqual({ ingest: true, queries: true });
  expect(meterParts(readMeterConfig({ METER_ROLE: 'ingest' }))).toEqual({ ingest: true, queries: false });
  expect(meterParts(readMeterConfig({ METER_ROLE: 'query' }))).toEqual({ ingest: false, queries: true });
  expect(() => readMeterConfig({ METER_ROLE: 'reads' })).toThrow();
});

it("tunes V8 for pages of records by default, and leaves V8's own at 0", () => {
  expect(readMeterConfig({})).toMatchObject({ METER_HEAP_GROWING_PERCENT: 200, METER_MINOR_GC_TRIGGER_PERCENT: 20 });
  expect(readMeterConfig({ METER_HEAP_GROWING_PERCENT: '0', METER_MINOR_GC_TRIGGER_PERCENT: '0' })).toMatchObject({ METER_HEAP_GROWING_PERCENT: 0, METER_MINOR_GC_TRIGGER_PERCENT: 0 });
  expect(() => readMeterConfig({ METER_MINOR_GC_TRIGGER_PERCENT: '101' })).toThrow();
  expect(() => readMeterConfig({ METER_HEAP_GROWING_PERCENT: '-1' })).toThrow();
});
