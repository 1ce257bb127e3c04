import { AckPolicy, connect, type NatsConnection, StringCodec } from 'nats';
import { createLogger, DurablePullConsumer, metricsRegistry, type Logger, type PullConsumerOptions } from '@fleet/service-kit';
import { trackConsumer, untrackConsumer } from '../src/consumer-metrics';
import { startPrivateNats, waitFor, type PrivateNats } from '@fleet/test-kit';

const sc = StringCodec();

/** A logger whose entries (pino's JSON lines, parsed) are kept for the test to read. */
function recordingLogger(): { logger: Logger; entries: Array<{ level: number; msg: string; stream?: string }> } {
  const entries: Array<{ level: number; msg: string; stream?: string }> = [];
  const logger = createLogger('test', 'debug', undefined, { write: (line: string) => void entries.push(JSON.parse(line) as (typeof entries)[number]) });
  return { logger, entries };
}
/** A consumer (durable 'worker', batches of 10) that collects what it is given, with its log. */
function collectingConsumer(options: Pick<PullConsumerOptions, 'stream' | 'filterSubject' | 'ackFloorRefreshMs'>) {
  const seen: string[] = [];
  const log = recordingLogger();
  const consumer = new DurablePullConsumer(nc, {
    durable: 'worker',
    batch: 10,
    logger: log.logger,
    process: async (messages) => {
      seen.push(...messages.map((m) => sc.decode(m.data)));
    },
    ...options,
  });
  return { consumer, seen, log };
}

let nats: PrivateNats;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startPrivateNats();
  nc = await connect({ servers: nats.url });
});

afterAll(async () => {
  await nc.close();
  await nats.stop();
});

describe('DurablePullConsumer', () => {
  it('waits for its stream, acks a batch after it was processed, and redelivers a failed batch', async () => {
    const seen: string[] = [];
    let failOnce = true;
    const log = recordingLogger();
    const consumer = new DurablePullConsumer(nc, {
      stream: 'S1',
      durable: 'worker',
      filterSubject: 'in.>',
      batch: 10,
      logger: log.logger,
      process: async (messages) => {
        if (failOnce && messages.some((m) => sc.decode(m.data) === 'b')) {
          failOnce = false;
          throw new Error('database down');
        }
        seen.push(...messages.map((m) => sc.decode(m.data)));
      },
    });
    consumer.start();
    // The stream appears after the consumer started, as when the bridge creates it later.
    await new Promise((r) => setTimeout(r, 300));
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: 'S1', subjects: ['in.>'] });
    const js = nc.jetstream();
    for (const v of ['a', 'b', 'c']) await js.publish(`in.${v}`, sc.encode(v));
    await waitFor(() => ['a', 'b', 'c'].every((v) => seen.includes(v)), { timeoutMs: 10_000, what: 'all messages processed' });
    await consumer.stop();
    const info = await jsm.consumers.info('S1', 'worker');
    expect(info.num_ack_pending).toBe(0);
    expect(info.num_pending).toBe(0);
    expect(failOnce).toBe(false);
    // Waiting for a stream at start is expected: one info line, no warning.
    expect(log.entries.filter((e) => e.stream === 'S1').map((e) => [e.level, e.msg])).toEqual([[30, 'stream does not exist yet (its owner makes it at start); waiting']]);
  });

  it('warns once its stream has been missing for longer than the grace', async () => {
    const log = recordingLogger();
    const consumer = new DurablePullConsumer(nc, {
      stream: 'S_MISSING',
      durable: 'worker',
      filterSubject: 'missing.>',
      batch: 10,
      streamWaitGraceMs: 300,
      logger: log.logger,
      process: async () => undefined,
    });
    consumer.start();
    const waits = () => log.entries.filter((e) => e.stream === 'S_MISSING').map((e) => [e.level, e.msg]);
    await waitFor(() => waits().length === 2, { timeoutMs: 5000, what: 'the warning after the grace' });
    await consumer.stop();
    expect(waits()).toEqual([
      [30, 'stream does not exist yet (its owner makes it at start); waiting'],
      [40, 'consumer not available; retrying'],
    ]);
  });

  it('makes its consumer again when its stream was deleted and made again, and reads the new stream', async () => {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: 'S_REMADE', subjects: ['remade.>'] });
    const { consumer, seen, log } = collectingConsumer({ stream: 'S_REMADE', filterSubject: 'remade.>' });
    consumer.start();
    const js = nc.jetstream();
    await js.publish('remade.a', sc.encode('before'));
    await waitFor(() => seen.includes('before'), { timeoutMs: 5000, what: 'the first message' });

    // A JetStream store lost, or an operator deleting the stream: the owner makes it again.
    await jsm.streams.delete('S_REMADE');
    await jsm.streams.add({ name: 'S_REMADE', subjects: ['remade.>'] });
    await js.publish('remade.b', sc.encode('after'));
    await waitFor(() => seen.includes('after'), { timeoutMs: 25_000, what: 'the message in the new stream' });
    await consumer.stop();
    expect(log.entries.some((e) => e.level === 40 && e.msg === 'consumer or its stream is gone; making the consumer again')).toBe(true);
  }, 30_000);

  it('makes its consumer again when it was deleted with its stream kept, resuming after the last acknowledgement floor it read', async () => {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: 'S_LOST', subjects: ['lost.>'] });
    const { consumer, seen, log } = collectingConsumer({ stream: 'S_LOST', filterSubject: 'lost.>', ackFloorRefreshMs: 100 });
    consumer.start();
    const js = nc.jetstream();
    for (let k = 0; k < 20; k++) await js.publish('lost.a', sc.encode(`before-${k}`));
    await waitFor(() => consumer.acknowledgedThrough === 20, { timeoutMs: 5000, what: 'the floor read after all 20 were acknowledged' });

    // An operator deleting the consumer by mistake: the stream and its 20 settled messages stay.
    await jsm.consumers.delete('S_LOST', 'worker');
    for (let k = 0; k < 5; k++) await js.publish('lost.b', sc.encode(`after-${k}`));
    await waitFor(() => seen.filter((v) => v.startsWith('after-')).length === 5, { timeoutMs: 25_000, what: 'the messages sent while the consumer was missing' });
    await consumer.stop();
    expect(seen).toEqual([...Array.from({ length: 20 }, (_, k) => `before-${k}`), ...Array.from({ length: 5 }, (_, k) => `after-${k}`)]);
    expect(log.entries).toContainEqual(expect.objectContaining({ msg: 'consumer missing from its stream; resuming after the last acknowledged message seen', startSeq: 21 }));
  }, 30_000);

  it('with lingerMs, gathers a trickle of messages into one batch, and handles a full batch at once', async () => {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: 'S_LINGER', subjects: ['linger.>'] });
    const batches: { values: string[]; at: number }[] = [];
    const consumer = new DurablePullConsumer(nc, {
      stream: 'S_LINGER',
      durable: 'lingering',
      filterSubject: 'linger.>',
      batch: 5,
      lingerMs: 400,
      logger: createLogger('test', 'silent'),
      process: async (messages) => {
        batches.push({ values: messages.map((m) => sc.decode(m.data)), at: Date.now() });
      },
    });
    consumer.start();
    const js = nc.jetstream();
    const started = Date.now();
    for (const v of ['a', 'b', 'c']) {
      await js.publish(`linger.${v}`, sc.encode(v));
      await new Promise((r) => setTimeout(r, 50));
    }
    await waitFor(() => batches.length === 1, { timeoutMs: 5000, what: 'the lingered batch' });
    expect(batches[0]?.values).toEqual(['a', 'b', 'c']);
    expect((batches[0]?.at ?? 0) - started).toBeGreaterThanOrEqual(350);
    // A full batch does not wait.
    const fullFrom = Date.now();
    await Promise.all(['d', 'e', 'f', 'g', 'h'].map((v) => js.publish(`linger.${v}`, sc.encode(v))));
    await waitFor(() => batches.flatMap((b) => b.values).length === 8, { timeoutMs: 5000, what: 'the full batch' });
    expect((batches.at(-1)?.at ?? 0) - fullFrom).toBeLessThan(350);
    await consumer.stop();
  });

  it('keeps its position but reads what it is now told to when an earlier version left it with another filter', async () => {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: 'S2', subjects: ['ev.>'] });
    const js = nc.jetstream();
    const seen: string[] = [];
    // Each version runs on its own connection, closed when it stops, as a process would.
    const reader = async (filterSubject: string) => {
      const conn = await connect({ servers: nats.url });
      const consumer = new DurablePullConsumer(conn, {
        stream: 'S2',
        durable: 'reader',
        filterSubject,
        batch: 10,
        logger: createLogger('test', 'silent'),
        process: async (messages) => void seen.push(...messages.map((m) => m.subject)),
      });
      consumer.start();
      return { stop: async () => (await consumer.stop(), await conn.close()) };
    };
    const old = await reader('ev.batch');
    await js.publish('ev.batch', sc.encode('1'));
    await waitFor(() => seen.length === 1, { timeoutMs: 10_000, what: 'the old version reading' });
    await old.stop();
    // Published while no reader runs: one by the old bridge, one by the new.
    await js.publish('ev.batch', sc.encode('2'));
    await js.publish('ev.batch.v1', sc.encode('3'));
    const upgraded = await reader('ev.>');
    await waitFor(() => seen.length === 3, { timeoutMs: 10_000, what: 'the new version reading both' });
    await upgraded.stop();
    expect(seen).toEqual(['ev.batch', 'ev.batch', 'ev.batch.v1']);
    expect((await jsm.consumers.info('S2', 'reader')).config.filter_subject).toBe('ev.>');
  });

  it('processes up to concurrentBatches batches at once and acknowledges each once committed', async () => {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: 'S3', subjects: ['par.>'] });
    const js = nc.jetstream();
    for (let i = 0; i < 40; i++) await js.publish(`par.${i}`, sc.encode(String(i)));
    let active = 0;
    let most = 0;
    const seen: string[] = [];
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    const consumer = new DurablePullConsumer(nc, {
      stream: 'S3',
      durable: 'parallel',
      filterSubject: 'par.>',
      batch: 10,
      concurrentBatches: 2,
      logger: createLogger('test', 'silent'),
      process: async (messages) => {
        active++;
        most = Math.max(most, active);
        // The first batch is held until a second one runs beside it: with one batch at a time this never ends.
        if (seen.length === 0 && most < 2) await firstHeld;
        if (active === 2) releaseFirst();
        seen.push(...messages.map((m) => sc.decode(m.data)));
        active--;
      },
    });
    consumer.start();
    await waitFor(() => seen.length === 40, { timeoutMs: 10_000, what: 'all 40 messages processed' });
    await consumer.stop();
    expect(most).toBe(2);
    expect(new Set(seen).size).toBe(40);
    const info = await jsm.consumers.info('S3', 'parallel');
    expect([info.num_ack_pending, info.num_pending]).toEqual([0, 0]);
  });
});

describe('consumer backlog metrics', () => {
  it('reports a tracked consumer’s pending, unacknowledged and redelivered messages at each scrape, and nothing once untracked', async () => {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: 'METRICS', subjects: ['metrics.>'] });
    await jsm.consumers.add('METRICS', { durable_name: 'lagging', ack_policy: AckPolicy.Explicit });
    const js = nc.jetstream();
    for (let k = 0; k < 5; k++) await js.publish('metrics.x', sc.encode(String(k)));
    trackConsumer(nc, 'METRICS', 'lagging');
    const text = await metricsRegistry.getSingleMetricAsString('fleet_jetstream_consumer_messages');
    expect(text).toContain('fleet_jetstream_consumer_messages{stream="METRICS",consumer="lagging",state="pending"} 5');
    expect(text).toContain('fleet_jetstream_consumer_messages{stream="METRICS",consumer="lagging",state="ack_pending"} 0');
    untrackConsumer('METRICS', 'lagging');
    expect(await metricsRegistry.getSingleMetricAsString('fleet_jetstream_consumer_messages')).not.toContain('consumer="lagging"');
  });
});
