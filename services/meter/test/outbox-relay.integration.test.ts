/**
 * The meter's outbox relay on a nats-server of this file's own (so its PARTNER_EVENTS stream
 * meets no other test's or fleet's) and a database of its own: the events the meter committed
 * (records stored, a live reading and an energy reset settled) reach PARTNER_EVENTS on their
 * `evt.partner.<type>.v1` subjects, as written, each once, and leave the outbox.
 */
import { connect, type JetStreamManager, type NatsConnection } from 'nats';
import { OutboxRelay, PARTNER_EVENTS_STREAM, type OutboxDb } from '@fleet/service-kit';
import { randomDeviceId, startPrivateNats, waitFor, type PrivateNats } from '@fleet/test-kit';
import { parseRecord } from '../src/domain/record';
import { newToken } from '../src/domain/requests';
import { ingestRecords } from '../src/store/ingest';
import { createReset, createSample, settleReset, settleSample } from '../src/store/requests';
import { createTestDb, logger, makeRecord, randomSid, type TestDb } from './support';

let nats: PrivateNats;
let nc: NatsConnection;
let jsm: JetStreamManager;
let testDb: TestDb;
let relay: OutboxRelay;

beforeAll(async () => {
  nats = await startPrivateNats();
  nc = await connect({ servers: nats.url });
  jsm = await nc.jetstreamManager();
  testDb = await createTestDb();
  // Polling rarely: after the first pass it relays new events because it is woken.
  relay = new OutboxRelay(testDb.db as unknown as OutboxDb, nc, logger, { streams: [PARTNER_EVENTS_STREAM], pollIntervalMs: 60_000 });
});

afterAll(async () => {
  await relay?.stop();
  await nc?.drain();
  await testDb?.drop();
  await nats?.stop();
});

interface Stored {
  subject: string;
  payload: unknown;
  msgId: string | undefined;
}

/** Every message PARTNER_EVENTS holds after stream sequence `after`, read one by one by sequence. */
async function streamAfter(after: number): Promise<Stored[]> {
  const last = (await jsm.streams.info(PARTNER_EVENTS_STREAM)).state.last_seq;
  const out: Stored[] = [];
  for (let seq = after + 1; seq <= last; seq++) {
    const m = await jsm.streams.getMessage(PARTNER_EVENTS_STREAM, { seq });
    out.push({ subject: m.subject, payload: m.json(), msgId: m.header.get('Nats-Msg-Id') || undefined });
  }
  return out;
}

const outbox = async (): Promise<Stored[]> =>
  (await testDb.db.outboxEvent.findMany({ orderBy: { id: 'asc' } })).map((e) => ({ subject: e.subject, payload: e.payload, msgId: e.msgId }));

it('publishes the meter’s committed events to PARTNER_EVENTS in commit order, each once', async () => {
  const d = randomDeviceId();
  const sid = randomSid();
  const record = (seq: number) => parseRecord(d, Buffer.from(JSON.stringify(makeRecord(sid, seq, 1_775_000_000 + seq * 900))), new Date());
  await ingestRecords(testDb.db, [record(0), record(1)]);
  const sample = newToken('s');
  await createSample(testDb.db, sample, d, new Date());
  await settleSample(testDb.db, d, sample, { state: 'failed', reason: 'busy' }, new Date());
  const reset = newToken('r');
  await createReset(testDb.db, reset, d, new Date());
  await settleReset(testDb.db, d, reset, 'ok', null, new Date());
  const waiting = await outbox();
  expect(waiting.map((e) => e.subject)).toEqual(['evt.partner.meter.records_stored.v1', 'evt.partner.meter.sample_settled.v1', 'evt.partner.meter.energy_reset_settled.v1']);

  // The relay creates PARTNER_EVENTS and publishes what waits.
  relay.start();
  await waitFor(async () => (await outbox()).length === 0, { timeoutMs: 10_000, what: 'the outbox to empty' });
  expect(await streamAfter(0)).toEqual(waiting);

  // A later change, relayed when the relay is woken (its poll is a minute away).
  const before = (await jsm.streams.info(PARTNER_EVENTS_STREAM)).state.last_seq;
  await ingestRecords(testDb.db, [record(2)]);
  const next = await outbox();
  await relay.wake();
  await waitFor(async () => (await outbox()).length === 0, { what: 'the woken relay' });
  const published = await streamAfter(before);
  expect(published).toEqual(next);
  expect(published[0]?.payload).toMatchObject({ event: { type: 'meter.records_stored', device_id: d, data: { count: 1 } } });
});
