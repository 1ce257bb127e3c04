/**
 * system-files' partner events on real NATS, JetStream and Postgres: each response-feed row it
 * stores (system.ack_received, system.log_received) and each file transfer that reaches a
 * terminal state (file_transfer.settled) writes one event into its outbox in the same
 * transaction; a redelivered line, a rolled-back change and a transfer settled already write
 * none; the relay moves them to PARTNER_EVENTS. Device traffic goes through a DEVICE_IN stream
 * of the file's own and the consumer the service runs; the relay publishes to a private
 * nats-server, so its PARTNER_EVENTS never meets a fleet's on the shared one.
 */
import { connect, DeliverPolicy, type JetStreamManager, type NatsConnection } from 'nats';
import { PARTNER_EVENTS_STREAM, partnerEventsRelay, type HandlerContext, type OutboxRelay } from '@fleet/service-kit';
import { principal, randomDeviceId, startPrivateNats, waitFor, type PrivateNats } from '@fleet/test-kit';
import { readFeedLine } from '../src/domain/feed';
import { newTransferId } from '../src/domain/transfer';
import type { SystemDeps } from '../src/handlers/deps';
import { listResponses } from '../src/handlers/responses';
import { createTransfer, getTransfer } from '../src/handlers/transfers';
import { appendFeedRows } from '../src/store/responses';
import { insertTransfer, markSent, settleOverdue, settleTransfer } from '../src/store/transfers';
import { captured, createTestDb, envelope, logger, startTestbed, type TestDb, type Testbed } from './support';

let testDb: TestDb;
let bed: Testbed;
let deps: SystemDeps;

const ctx = { logger, deadline: Date.now() + 60_000, remainingMs: () => 60_000 } as unknown as HandlerContext;
const SHA = 'ab'.repeat(32);

beforeAll(async () => {
  testDb = await createTestDb();
  const urls = { downloadUrl: async (f: { dir: string; name: string }) => `https://files.test/d/${f.dir}.${f.name}`, uploadUrl: () => 'http://127.0.0.1:1/u' };
  bed = await startTestbed({ db: testDb.db, urls, env: { TRANSFER_ACK_TIMEOUT_SECONDS: '30' } });
  deps = bed.deps;
  bed.startIntake(testDb.db);
  await testDb.db.platformFile.create({ data: { dir: 'files', name: 'chime.mp3', size: 1000n, sha256: SHA, storageKey: 'files/chime.mp3' } });
});

afterAll(async () => {
  await bed?.close();
  await testDb?.drop();
});

beforeEach(() => bed.bridge.reset());

interface EventRow {
  subject: string;
  type: unknown;
  device_id: unknown;
  data: Record<string, unknown>;
}

/** The outbox's partner events of a device, oldest first. */
async function eventsOf(deviceId: string): Promise<EventRow[]> {
  const rows = await testDb.db.outboxEvent.findMany({ orderBy: { id: 'asc' } });
  return rows
    .map((r) => ({ subject: r.subject, event: (r.payload as { event: Record<string, unknown> }).event }))
    .filter((r) => r.event.device_id === deviceId)
    .map((r) => ({ subject: r.subject, type: r.event.type, device_id: r.event.device_id, data: r.event.data as Record<string, unknown> }));
}

const sysResp = (deviceId: string, line: string, msgId?: string) => captured(bed.js, bed.stream.prefix, { deviceId, levels: 'sys/resp', payload: line, ...(msgId ? { msgId } : {}) });
const feed = async (deviceId: string) =>
  ((await listResponses(deps, envelope(deviceId, { query: { since: new Date(Date.now() - 3_600_000).toISOString() } }) as never)).body as { rows: Array<Record<string, unknown>> }).rows;
const push = async (deviceId: string, dest: string) =>
  (await createTransfer(deps, envelope(deviceId, { body: { name: 'chime.mp3', dest }, principal: principal() }) as never, ctx)).body as { transfer_id: string };
const read = async (deviceId: string, transferId: string) => (await getTransfer(deps, envelope(deviceId, { params: { transfer_id: transferId } }) as never)).body as Record<string, unknown>;
/** The consumer is past every message put in before this one (it reads the stream in order). */
async function marker(deviceId: string): Promise<void> {
  const line = `log>marker ${Math.random()}`;
  await sysResp(deviceId, line);
  await waitFor(async () => (await feed(deviceId)).some((r) => r.line === line), { what: 'the marker line in the feed' });
}

describe('response feed', () => {
  it('writes one event per acknowledgement and log line it stores, its data the row as the feed shows it; other lines announce nothing', async () => {
    const id = randomDeviceId();
    const lines = ['set>volume=5>ok', 'log>rebooting', 'weird line', 'addfile>name=a.mp3;sha256=00;url=u>failed:sha256 mismatch'];
    for (const line of lines) await sysResp(id, line);
    await waitFor(async () => (await feed(id)).length === lines.length, { what: 'the lines in the feed' });
    const rows = await feed(id);
    expect(await eventsOf(id)).toEqual([
      { subject: 'evt.partner.system.ack_received.v1', type: 'system.ack_received', device_id: id, data: rows[0] },
      { subject: 'evt.partner.system.log_received.v1', type: 'system.log_received', device_id: id, data: rows[1] },
      { subject: 'evt.partner.system.ack_received.v1', type: 'system.ack_received', device_id: id, data: rows[3] },
    ]);
    expect(rows[0]).toMatchObject({ line: 'set>volume=5>ok', kind: 'ack', command: 'set>volume=5', result: 'ok' });
    expect(rows[1]).toMatchObject({ line: 'log>rebooting', kind: 'log', text: 'rebooting' });
  });

  it('writes nothing for a line the feed already holds, whoever delivers it again', async () => {
    const id = randomDeviceId();
    await sysResp(id, 'query>ok', 'capture-1');
    await marker(id);
    const before = await eventsOf(id);
    expect(before.map((e) => e.type)).toEqual(['system.ack_received', 'system.log_received']);

    // A second consumer of the stream reads every message again, as JetStream redelivers one
    // whose acknowledgement was lost: the feed holds them all, so nothing is written.
    const second = bed.startIntake(testDb.db, 'sys-again');
    await waitFor(async () => (await pending('sys-again')) === 0, { what: 'the second consumer to read the stream' });
    await second.stop();
    expect(await eventsOf(id)).toEqual(before);
    expect(await feed(id)).toHaveLength(2);

    // The same line stored by the store directly once more: nothing either.
    const again = { deviceId: id, receivedAt: new Date(), msgId: 'capture-1', ...readFeedLine('query>ok') };
    expect(await testDb.db.$transaction((tx) => appendFeedRows(tx, [again, again]))).toBe(0);
    expect(await eventsOf(id)).toEqual(before);
  });

  it('leaves no event when the transaction that stored the row rolls back', async () => {
    const id = randomDeviceId();
    const row = { deviceId: id, receivedAt: new Date(), msgId: 'capture-2', ...readFeedLine('log>hello') };
    await expect(
      testDb.db.$transaction(async (tx) => {
        expect(await appendFeedRows(tx, [row])).toBe(1);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await feed(id)).toEqual([]);
    expect(await eventsOf(id)).toEqual([]);
    // Stored for real afterwards: announced once.
    expect(await testDb.db.$transaction((tx) => appendFeedRows(tx, [row]))).toBe(1);
    expect((await eventsOf(id)).map((e) => e.data.line)).toEqual(['log>hello']);
  });
});

describe('file transfers', () => {
  const settledEvents = async (id: string) => (await eventsOf(id)).filter((e) => e.type === 'file_transfer.settled');

  it('writes file_transfer.settled once when the device acknowledges, its data the transfer as GET answers it', async () => {
    const id = randomDeviceId();
    const ok = await push(id, 'ok.mp3');
    const failed = await push(id, 'bad.mp3');
    expect(await settledEvents(id)).toEqual([]);
    const [okLine, failedLine] = bed.bridge.published.map((p) => p.payload as string);
    await sysResp(id, `${okLine}>ok`);
    await sysResp(id, `${failedLine}>failed:no space`);
    await waitFor(async () => (await read(id, failed.transfer_id)).terminal === true, { what: 'the failed transfer settled' });
    const events = await settledEvents(id);
    expect(events).toEqual([
      { subject: 'evt.partner.file_transfer.settled.v1', type: 'file_transfer.settled', device_id: id, data: await read(id, ok.transfer_id) },
      { subject: 'evt.partner.file_transfer.settled.v1', type: 'file_transfer.settled', device_id: id, data: await read(id, failed.transfer_id) },
    ]);
    expect(events.map((e) => [e.data.state, e.data.terminal, e.data.poll_after_s])).toEqual([
      ['succeeded', true, null],
      ['failed', true, null],
    ]);

    // The device acknowledges again (another capture): a feed row and its event, no second settlement.
    await sysResp(id, `${okLine}>ok`);
    await marker(id);
    expect(await settledEvents(id)).toEqual(events);
    expect((await eventsOf(id)).filter((e) => e.type === 'system.ack_received')).toHaveLength(3);
  });

  it('writes file_transfer.settled once for a transfer past its deadline, however many replicas sweep, and not again when the device acknowledges late', async () => {
    const id = randomDeviceId();
    const late = await push(id, 'late.mp3');
    const stale = newTransferId();
    await insertTransfer(testDb.db, { id: stale, deviceId: id, partnerId: 'p1', idempotencyKey: null, fingerprint: 'f', src: 'files/chime.mp3', dest: 'stale.mp3', sha256: SHA, corrMode: 'envelope', line: '' });
    // Three replicas' sweeps at once.
    const now = new Date(Date.now() + 31_000);
    await Promise.all([1, 2, 3].map(() => settleOverdue(testDb.db, now, now)));
    const events = await settledEvents(id);
    expect(events).toHaveLength(2);
    expect(events.map((e) => e.data)).toEqual(expect.arrayContaining([await read(id, late.transfer_id), await read(id, stale)]));
    // A transfer left queued (its push stopped before it knew the publish's outcome) is no
    // failure the device reported: its outcome is unknown, as a sent one past its deadline.
    expect(Object.fromEntries(events.map((e) => [e.data.transfer_id, e.data.state]))).toEqual({ [late.transfer_id]: 'timed_out', [stale]: 'timed_out' });
    expect(await read(id, stale)).toMatchObject({ state: 'timed_out', detail: expect.stringContaining('check file_list') });

    await settleOverdue(testDb.db, new Date(now.getTime() + 60_000), now);
    await sysResp(id, `${bed.bridge.published[0]?.payload as string}>ok`);
    await marker(id);
    expect(await read(id, late.transfer_id)).toMatchObject({ state: 'timed_out' });
    expect(await settledEvents(id)).toEqual(events);
  });

  it('dates the send of a transfer acknowledged before it was marked sent, and keeps its outcome when it is', async () => {
    const id = randomDeviceId();
    const quick = newTransferId();
    await insertTransfer(testDb.db, { id: quick, deviceId: id, partnerId: 'p1', idempotencyKey: null, fingerprint: 'f', src: 'files/chime.mp3', dest: 'quick.mp3', sha256: SHA, corrMode: 'envelope', line: '' });
    const ackAt = new Date();
    await testDb.db.$transaction((tx) => settleTransfer(tx, { deviceId: id, transferId: quick, line: '' }, { state: 'succeeded', detail: 'device acknowledged: ok', at: ackAt }));
    const [event] = await settledEvents(id);
    expect(event?.data).toMatchObject({ state: 'succeeded', attempts: 1, timeline: { sent_at: ackAt.toISOString() } });
    // The broker's PUBACK is handled after the acknowledgement: the send gets the broker's time and deadline, the outcome stays.
    const sentAt = new Date(ackAt.getTime() - 40);
    await markSent(testDb.db, quick, sentAt, new Date(sentAt.getTime() + 30_000));
    expect(await read(id, quick)).toMatchObject({
      state: 'succeeded',
      attempts: 1,
      timeline: { sent_at: sentAt.toISOString(), ack_deadline: new Date(sentAt.getTime() + 30_000).toISOString() },
    });
  });

  it('leaves no event when the settlement rolls back', async () => {
    const id = randomDeviceId();
    const t = await push(id, 'rollback.mp3');
    const outcome = { state: 'succeeded' as const, detail: 'device acknowledged: ok', at: new Date() };
    await expect(
      testDb.db.$transaction(async (tx) => {
        expect(await settleTransfer(tx, { deviceId: id, transferId: t.transfer_id, line: '' }, outcome)).toHaveLength(1);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await read(id, t.transfer_id)).toMatchObject({ state: 'sent' });
    expect(await settledEvents(id)).toEqual([]);
  });
});

describe('the relay', () => {
  let nats: PrivateNats;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let relay: OutboxRelay;

  beforeAll(async () => {
    nats = await startPrivateNats();
    nc = await connect({ servers: nats.url });
    jsm = await nc.jetstreamManager();
  });

  afterAll(async () => {
    await relay?.stop();
    await nc?.close();
    await nats?.stop();
  });

  /** What PARTNER_EVENTS holds, oldest first. */
  async function stored(): Promise<Array<{ subject: string; payload: unknown; msgId: string | undefined }>> {
    const count = (await jsm.streams.info(PARTNER_EVENTS_STREAM)).state.messages;
    const consumer = await nc.jetstream().consumers.get(PARTNER_EVENTS_STREAM, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: 1 });
    const out: Array<{ subject: string; payload: unknown; msgId: string | undefined }> = [];
    if (count === 0) return out;
    for await (const m of await consumer.fetch({ max_messages: count, expires: 5_000 })) {
      out.push({ subject: m.subject, payload: m.json(), msgId: m.headers?.get('Nats-Msg-Id') });
      if (out.length === count) break;
    }
    return out;
  }

  it('puts the outbox’s events on PARTNER_EVENTS in commit order, then the events of new changes', async () => {
    // What earlier tests left, and two events of this one, committed before the relay starts.
    const before = randomDeviceId();
    await sysResp(before, 'query>ok');
    await sysResp(before, 'log>before the relay started');
    await waitFor(async () => (await eventsOf(before)).length === 2, { what: 'the events in the outbox' });
    const waiting = await testDb.db.outboxEvent.findMany({ orderBy: { id: 'asc' } });
    relay = partnerEventsRelay(testDb.db, nc, logger, { pollIntervalMs: 100 });
    relay.start();
    await waitFor(async () => (await testDb.db.outboxEvent.count()) === 0, { timeoutMs: 15_000, what: 'the outbox to empty' });
    expect(await stored()).toEqual(waiting.map((e) => ({ subject: e.subject, payload: e.payload, msgId: e.msgId })));

    // A line the intake stores now reaches the stream too.
    const id = randomDeviceId();
    await sysResp(id, 'log>after the relay started');
    await waitFor(async () => (await stored()).some((e) => (e.payload as { event: { device_id?: string } }).event.device_id === id), { what: 'the new event on PARTNER_EVENTS' });
    const last = (await stored()).at(-1);
    expect(last).toMatchObject({ subject: 'evt.partner.system.log_received.v1', payload: { event: { type: 'system.log_received', device_id: id, data: { line: 'log>after the relay started', kind: 'log' } } } });
  });
});

async function pending(durable: string): Promise<number> {
  const info = await (await bed.bus.connection.jetstreamManager()).consumers.info(bed.stream.name, durable);
  return info.num_pending + info.num_ack_pending;
}
