import { randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { DevicePool, MqttProbe, SimulatedLight, SimulatedMeter, type IntervalRecord } from '@fleet/device-sim';
import { waitFor } from '@fleet/test-kit';
import { BROKER, cleanup, ROOT_SECRET, TIDY, uniqueRoot } from './helpers';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const root = uniqueRoot('pool');
let probe: MqttProbe;
let records: MqttProbe;

function heapMb(): { heap: number; rss: number } {
  gc();
  gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed / 1048576, rss: m.rss / 1048576 };
}

beforeAll(async () => {
  probe = await MqttProbe.open(BROKER, [`${root}/+/status`, `${root}/+/sys/resp`]);
  // QoS 0: a thousand meters publish at the same simulated instant, more than the machine's
  // broker queues for one QoS 1/2 subscriber (max_queued_messages 1000), which would drop some.
  records = await MqttProbe.open(BROKER);
  await records.subscribe([`${root}/+/iv`], 0);
});
afterAll(async () => {
  await records.close();
  await cleanup(root, probe);
}, 30_000);

describe('DevicePool', () => {
  it('connects 1000 lights from one process quickly and with little memory per device; they all answer', async () => {
    const pool = new DevicePool({
      brokerUrl: BROKER,
      product: 'light',
      idPrefix: randomBytes(3).toString('hex').slice(0, 5),
      count: 1000,
      rootSecret: ROOT_SECRET,
      concurrency: 100,
      device: { topicRoot: root, ...TIDY },
    });
    const before = heapMb();
    try {
      const result = await pool.start();
      expect(result).toMatchObject({ connected: 1000, failed: 0 });
      const onlines = await probe.waitForCount((m) => m.topic.endsWith('/status') && m.text === 'online', 1000, 20_000);
      expect(new Set(onlines.map((m) => m.topic)).size).toBe(1000);
      const after = heapMb();
      const perDeviceKb = ((after.heap - before.heap) * 1024) / 1000;
      const rssPerDeviceKb = ((after.rss - before.rss) * 1024) / 1000;
      console.log(
        `pool of 1000 lights: connected in ${(result.elapsedMs / 1000).toFixed(2)} s (${Math.round(1000 / (result.elapsedMs / 1000))} connects/s); ` +
          `heap ${before.heap.toFixed(1)} -> ${after.heap.toFixed(1)} MB (${perDeviceKb.toFixed(1)} KB/device), rss ${before.rss.toFixed(0)} -> ${after.rss.toFixed(0)} MB (${rssPerDeviceKb.toFixed(1)} KB/device)`,
      );
      expect(result.elapsedMs).toBeLessThan(30_000);
      expect(perDeviceKb).toBeLessThan(200);
      expect(pool.snapshot()).toMatchObject({ devices: 1000, connected: 1000, connects: 1000 });

      // Every tenth device gets a command and acknowledges it.
      const sample = pool.devices.filter((_, k) => k % 10 === 0) as SimulatedLight[];
      await Promise.all(sample.map((d) => probe.publish(`${d.base}/sys/exe`, 'query>', { qos: 2 })));
      const acks = await probe.waitForCount((m) => m.topic.endsWith('/sys/resp') && m.text === 'query>ok', sample.length, 10_000);
      expect(new Set(acks.map((m) => m.topic))).toEqual(new Set(sample.map((d) => `${d.base}/sys/resp`)));
    } finally {
      await pool.stop();
    }
    const offlines = await probe.waitForCount((m) => m.topic.endsWith('/status') && m.text === 'offline', 1000, 20_000);
    expect(offlines.length).toBe(1000);
    expect(pool.connectedCount()).toBe(0);
  }, 90_000);

  it('runs 1000 meters on one shared clock, each sending consecutive accelerated records', async () => {
    const pool = new DevicePool({
      brokerUrl: BROKER,
      product: 'meter',
      idPrefix: randomBytes(3).toString('hex').slice(0, 5),
      count: 1000,
      rootSecret: ROOT_SECRET,
      speed: 600,
      connectRate: 2000,
      device: { topicRoot: root, ...TIDY, intervalSec: 900, recordLimit: 10 },
    });
    try {
      const result = await pool.start();
      expect(result.connected).toBe(1000);
      const t0 = Date.now();
      // 900 simulated seconds take 1.5 real seconds: every meter's records reach the platform side.
      await waitFor(() => new Set(records.messages.map((m) => m.topic)).size === 1000, { timeoutMs: 30_000, what: 'a record from every meter' });
      console.log(`pool of 1000 meters at speed 600: ${pool.stats.records} records after ${Date.now() - t0} ms; rss ${(process.memoryUsage().rss / 1048576).toFixed(0)} MB`);
      // Device side: each meter's records are consecutive in seq and in time.
      for (const meter of pool.devices as SimulatedMeter[]) {
        const sent = meter.sentRecords.map((s) => s.record);
        expect(sent.length).toBeGreaterThanOrEqual(1);
        expect(sent.map((r) => r.seq)).toEqual(sent.map((_, k) => k));
        sent.forEach((r, k) => expect(r.start).toBe(sent[0]!.start! + 900 * k));
      }
      // Platform side: per meter and sid, seq only goes up (QoS 1 keeps a client's order).
      const bySid = new Map<string, number[]>();
      for (const m of records.messages) {
        const rec = JSON.parse(m.text) as IntervalRecord;
        const key = `${m.topic} ${rec.sid}`;
        bySid.set(key, [...(bySid.get(key) ?? []), rec.seq]);
      }
      for (const seqs of bySid.values()) expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    } finally {
      await pool.stop({ abrupt: true });
    }
  }, 90_000);
});
