import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { ManualClock, SimulatedMeter, type IntervalRecord, type MeterOptions, type MqttProbe } from '@fleet/device-sim';
import { brokerProxy, BROKER, cleanup, openProbe, ROOT_SECRET, TIDY, uniqueRoot } from './helpers';

const root = uniqueRoot('meter');
let probe: MqttProbe;
const running: SimulatedMeter[] = [];

function meter(extra: Partial<MeterOptions> = {}): SimulatedMeter {
  const m = new SimulatedMeter({ brokerUrl: BROKER, deviceId: randomDeviceId(), rootSecret: ROOT_SECRET, topicRoot: root, ...TIDY, ...extra });
  running.push(m);
  return m;
}

async function started(extra: Partial<MeterOptions> = {}): Promise<SimulatedMeter> {
  const m = meter(extra);
  await m.start();
  await probe.waitFor((x) => x.topic === `${m.base}/sys/settings`);
  return m;
}

async function exe(m: SimulatedMeter, line: string): Promise<string> {
  const reply = probe.next((x) => x.topic === `${m.base}/sys/resp` && !x.text.startsWith('log>'), 5000, `ack of ${line}`);
  await probe.publish(`${m.base}/sys/exe`, line, { qos: 2 });
  return (await reply).text;
}

/** Interval records of a meter as the platform received them, in arrival order. */
async function records(m: SimulatedMeter, count: number, timeoutMs = 5000): Promise<IntervalRecord[]> {
  const got = await probe.waitForCount((x) => x.topic === `${m.base}/iv`, count, timeoutMs);
  return got.map((x) => JSON.parse(x.text) as IntervalRecord);
}

beforeAll(async () => {
  probe = await openProbe(root);
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((d) => d.stop().catch(() => undefined)));
});
afterAll(async () => {
  await cleanup(root, probe);
});

describe('SimulatedMeter interval records', () => {
  it('sends accelerated records with consecutive seq, aligned starts and energy consistent with power × time', async () => {
    const m = await started({ speed: 6000, intervalSec: 900, loadW: 1200 });
    const recs = await records(m, 4, 8000);
    const [first] = recs;
    expect(first!.sid).toMatch(/^[0-9a-f]{8}$/);
    recs.forEach((r, k) => {
      expect(r).toMatchObject({ sid: first!.sid, seq: k, clock: 'synced', dur: 900, n: 900, err: 0, ct: 1, alarms: 0, partial: false });
      expect(r.start).toBe(first!.start! + 900 * k);
      expect(r.v![0]).toBeGreaterThan(225);
      expect(r.v![0]).toBeLessThan(235);
      expect(Math.abs(r.f![0] - 50)).toBeLessThan(0.1);
      expect(r.pf![0]).toBeGreaterThan(0.8);
      expect(r.pf![2]).toBeLessThanOrEqual(1);
      expect(r.v![1]).toBeLessThanOrEqual(r.v![0]);
      expect(r.v![2]).toBeGreaterThanOrEqual(r.v![0]);
      // i ≈ p / (v · pf) on average
      expect(r.i![0]).toBeCloseTo(r.p![0] / (r.v![0] * r.pf![0]), 0);
      // The counter rises by the power integrated over the reads after the first one.
      const expectedWh = (r.p![0] * (r.n - 1)) / 3600;
      expect(Math.abs(r.e![1] - r.e![0] - expectedWh) / expectedWh).toBeLessThan(0.01);
      if (k > 0) {
        const gap = r.e![0] - recs[k - 1]!.e![1];
        expect(gap).toBeGreaterThan(0);
        expect(gap).toBeLessThanOrEqual(r.p![2] / 3600 + 0.002);
      }
    });
    // The published payloads are exactly the ones the meter reports having sent.
    expect(m.sentRecords.slice(0, 4).map((s) => s.record)).toEqual(recs);
    expect(m.records.slice(0, 4)).toEqual(recs);
  });

  it('closes the interval early on report> with partial: true and carries on from there', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 10, 0, 0));
    const m = await started({ clock, intervalSec: 900 });
    clock.advance(300_000);
    expect(await exe(m, 'report>')).toBe('report>ok');
    const [partial] = await records(m, 1);
    expect(partial).toMatchObject({ seq: 0, partial: true, dur: 300, n: 300 });
    clock.advance(900_000);
    const [, next] = await records(m, 2);
    expect(next).toMatchObject({ seq: 1, partial: false, dur: 900, n: 900, start: partial!.start! + 300 });
    expect(next!.e![0]).toBeGreaterThan(partial!.e![1]);
  });

  it('starts a new sid with seq 0 after a restart, and keeps the counter', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 11, 0, 0));
    const m = await started({ clock, intervalSec: 60 });
    clock.advance(120_000);
    const before = await records(m, 2);
    const oldSid = m.sid;
    await m.restart();
    await probe.waitForCount((x) => x.topic === `${m.base}/status` && x.text === 'online', 2);
    expect(m.sid).not.toBe(oldSid);
    clock.advance(60_000);
    const after = (await records(m, 3))[2]!;
    expect(after).toMatchObject({ sid: m.sid, seq: 0 });
    expect(after.e![0]).toBeGreaterThan(before[1]!.e![1]);

    const same = await started({ clock, intervalSec: 60, newSidOnRestart: false });
    const sid = same.sid;
    clock.advance(60_000);
    await same.restart();
    expect([same.sid, same.seq]).toEqual([sid, 0]);
  });

  it('reports free and none clocks as the protocol says', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));
    const free = await started({ clock, intervalSec: 120, clockMode: 'free' });
    const none = await started({ clock, intervalSec: 120, clockMode: 'none' });
    clock.advance(240_000);
    const [f0, f1] = await records(free, 2);
    expect(f0).toMatchObject({ start: null, clock: 'free', up: 0, up_now: 120 });
    expect(f1).toMatchObject({ start: null, clock: 'free', up: 120, up_now: 240 });
    const [n0] = await records(none, 1);
    expect(n0).toMatchObject({ start: null, clock: 'none' });
    expect(n0).not.toHaveProperty('up');
  });

  it('scales raw i, p and e by the CT turns from the next interval on', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 13, 0, 0));
    const m = await started({ clock, intervalSec: 60, loadW: () => 500 });
    clock.advance(30_000);
    m.setCtTurns(4);
    clock.advance(90_000);
    // The interval in progress when the turns changed keeps ct 1; the next one has 4.
    const [one, four] = await records(m, 2);
    expect(one!.ct).toBe(1);
    expect(four!.ct).toBe(4);
    expect(one!.p![0]).toBeCloseTo(500, 0);
    expect(four!.p![0]).toBeCloseTo(2000, 0);
    // i = p / (v · pf), and v and pf carry their own noise (pf 0.90 to 0.99): 4 within that spread.
    expect(four!.i![0] / one!.i![0]).toBeGreaterThan(4 * 0.9);
    expect(four!.i![0] / one!.i![0]).toBeLessThan(4 / 0.9);
    expect((four!.e![1] - four!.e![0]) / (one!.e![1] - one!.e![0])).toBeCloseTo(4, 2);
  });

  it('counts failed reads when its link to the meter is down', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 14, 0, 0));
    const m = await started({ clock, intervalSec: 60, link: 'timeout' });
    clock.advance(60_000);
    const [r] = await records(m, 1);
    expect(r).toMatchObject({ n: 0, err: 60, v: null, i: null, p: null, f: null, pf: null, e: null });
  });
});

describe('SimulatedMeter on a clock that runs its tasks late', () => {
  /** Reads a time ahead of the tasks it has run, as a shared clock does under load. */
  class LateClock extends ManualClock {
    lagMs = 0;
    override now(): number {
      return super.now() + this.lagMs;
    }
  }

  it.each([
    ['a reset', (m: SimulatedMeter) => m.resetEnergy()],
    ['a live reading', (m: SimulatedMeter) => void m.liveReading()],
    ['report>', (m: SimulatedMeter) => void m.report()],
  ])('closes an ended interval at its boundary before %s reads past it', async (_what, act) => {
    const clock = new LateClock(Date.UTC(2026, 10, 22, 21, 0, 0));
    const m = await started({ clock, intervalSec: 60, loadW: () => 600 });
    clock.advance(50_000);
    clock.lagMs = 30_000; // the clock reads 80 s; the close task due at 60 s has not run
    act(m);
    const [first] = await records(m, 1);
    expect(first).toMatchObject({ seq: 0, dur: 60, n: 60, err: 0, partial: false });
    clock.lagMs = 0;
    clock.advance(70_000);
    const [, second] = await records(m, 2);
    expect(second!.start).toBe(first!.start! + 60);
    expect(second!.n + second!.err).toBeLessThanOrEqual(second!.dur!);
  });
});

describe('SimulatedMeter connection loss', () => {
  it('reconnects after the connection drops, announces itself again and delivers records made while away', async () => {
    const proxy = await brokerProxy();
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 20, 0, 0));
    const m = meter({ brokerUrl: proxy.url, clock, intervalSec: 60, reconnectMs: 300 });
    // The link's history, shown beside the state should the meter be found offline again.
    const link: string[] = [];
    const t0 = Date.now();
    for (const event of ['connect', 'disconnect', 'error'] as const) m.on(event, (detail?: unknown) => link.push(`${Date.now() - t0}ms ${event}${detail instanceof Error ? `: ${detail.message}` : ''}`));
    try {
      await m.start();
      await probe.waitFor((x) => x.topic === `${m.base}/sys/settings`);
      const will = probe.next((x) => x.topic === `${m.base}/status` && x.text === 'offline', 5000, 'will');
      proxy.cut();
      await will;
      await waitFor(() => m.state === 'offline', { what: 'the meter to notice the lost connection' });
      clock.advance(60_000); // a record closes while the meter is offline
      proxy.resume();
      await probe.waitForCount((x) => x.topic === `${m.base}/status` && x.text === 'online', 2, 5000);
      await probe.waitForCount((x) => x.topic === `${m.base}/sys/settings`, 2, 5000);
      const [rec] = await records(m, 1);
      expect(rec).toMatchObject({ sid: m.sid, seq: 0 });
      expect({ state: m.state, disconnects: m.stats.disconnects, link }).toMatchObject({ state: 'online', disconnects: 1 });
      expect(m.boots).toBe(1); // a lost connection is not a restart: same sid
    } finally {
      await m.stop();
      await proxy.close();
    }
  });
});

describe('SimulatedMeter verbs', () => {
  it('answers sample> on live with a reading, storing nothing', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 15, 0, 0));
    const m = await started({ clock, intervalSec: 900, ctTurns: 2 });
    clock.advance(10_500);
    const live = probe.next((x) => x.topic === `${m.base}/live`);
    expect(await exe(m, 'sample>token=t_5f2c')).toBe('sample>token=t_5f2c>ok');
    const answer = JSON.parse((await live).text);
    expect(answer).toEqual({ token: 't_5f2c', link: 'ok', v: expect.any(Number), i: expect.any(Number), p: expect.any(Number), pf: expect.any(Number), f: expect.any(Number), ct: 2, age_s: 0.5 });
    expect(m.records).toEqual([]);
    clock.advance(900_000);
    const [r] = await records(m, 1);
    expect([r!.seq, r!.n, r!.partial]).toEqual([0, 900, false]);
  });

  it.each([['busy'], ['config_mode'], ['unsupported'], ['rejected'], ['no_snapshot']] as const)('answers sample> with error %s when switched', async (error) => {
    const m = await started({ sampleError: error });
    const live = probe.next((x) => x.topic === `${m.base}/live`);
    expect(await exe(m, 'sample>token=e1')).toBe('sample>token=e1>ok');
    expect(JSON.parse((await live).text)).toEqual({ token: 'e1', error });
  });

  it('stays quiet on live with sampleError no_answer, and reports a down link', async () => {
    const quiet = await started({ sampleError: 'no_answer' });
    expect(await exe(quiet, 'sample>token=q1')).toBe('sample>token=q1>ok');
    await new Promise((r) => setTimeout(r, 200));
    expect(probe.on(`${quiet.base}/live`)).toEqual([]);

    const down = await started({ link: 'crc' });
    const live = probe.next((x) => x.topic === `${down.base}/live`);
    await exe(down, 'sample>token=d1');
    expect(JSON.parse((await live).text)).toMatchObject({ token: 'd1', link: 'crc', v: null, i: null, p: null, ct: 1 });
  });

  it('zeroes the counter on resetenergy> and acks ok, duplicate, failed and unreadable tokens per the grammar', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 16, 0, 0));
    const m = await started({ clock, intervalSec: 60, initialEnergyWh: 100_000, loadW: () => 3600 });
    clock.advance(60_000);
    const [before] = await records(m, 1);
    expect(before!.e![1]).toBeGreaterThan(100_000);
    clock.advance(30_000);
    expect(await exe(m, 'resetenergy>token=r_1')).toBe('resetenergy>token=r_1>ok');
    expect(m.energyWh).toBe(0);
    clock.advance(30_000);
    const [, across] = await records(m, 2);
    // The interval spanning the reset starts high and ends near zero (30 reads of 1 Wh each).
    expect(across!.e![0]).toBeGreaterThan(100_000);
    expect(across!.e![1]).toBeCloseTo(29, 0);
    expect(await exe(m, 'resetenergy>token=r_1')).toBe('resetenergy>token=r_1>duplicate');
    expect(await exe(m, 'resetenergy>')).toBe('resetenergy>>failed:unreadable token');
    expect(await exe(m, 'resetenergy>token=not readable!')).toBe('resetenergy>>failed:unreadable token');
    m.meterOpts.resetEnergyFailure = 'meter locked';
    expect(await exe(m, 'resetenergy>token=r_2')).toBe('resetenergy>token=r_2>failed:meter locked');
    m.meterOpts.resetEnergyFailure = null;
    m.misbehave({ refuse: ['resetenergy'], refuseReason: 'refused' });
    expect(await exe(m, 'resetenergy>token=r_3')).toBe('resetenergy>token=r_3>failed:refused');
    expect(await exe(m, 'report>')).toBe('report>ok');
    // Tokens survive a restart.
    m.misbehave({ refuse: false });
    await m.restart();
    await probe.waitForCount((x) => x.topic === `${m.base}/status` && x.text === 'online', 2);
    expect(await exe(m, 'resetenergy>token=r_1')).toBe('resetenergy>token=r_1>duplicate');
  });

  it('acknowledges the common verbs too', async () => {
    const m = await started();
    expect(await exe(m, 'query>')).toBe('query>ok');
    expect(await exe(m, 'set>ct_turns=3')).toBe('set>ct_turns=3>ok');
    expect(await exe(m, 'rmfile>name=x')).toBe('rmfile>name=x>failed:no such file');
    expect(await exe(m, 'reboot>')).toBe('reboot>ok');
    await probe.waitForCount((x) => x.topic === `${m.base}/status` && x.text === 'online', 2);
    expect(m.ctTurns).toBe(3);
  });
});

describe('SimulatedMeter misbehaviour', () => {
  it('sends every record twice with duplicateRecords', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 17, 0, 0));
    const m = await started({ clock, intervalSec: 60, duplicateRecords: true });
    clock.advance(180_000);
    const recs = await records(m, 6);
    expect(recs.map((r) => r.seq)).toEqual([0, 0, 1, 1, 2, 2]);
    expect(recs[0]).toEqual(recs[1]);
    expect(m.sentRecords.map((s) => s.duplicate)).toEqual([false, true, false, true, false, true]);
  });

  it('withholds some records and sends them later, out of order, with lateRecords', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 18, 0, 0));
    const m = await started({ clock, intervalSec: 60, lateRecords: { every: 3, after: 2 } });
    clock.advance(9 * 60_000);
    const recs = await records(m, 8);
    expect(recs.map((r) => r.seq)).toEqual([0, 1, 3, 4, 2, 6, 7, 5]);
    expect(m.heldRecords.map((r) => r.seq)).toEqual([8]);
    await m.flushLate();
    expect((await records(m, 9)).map((r) => r.seq)).toEqual([0, 1, 3, 4, 2, 6, 7, 5, 8]);
    expect(m.sentRecords.map((s) => s.late)).toEqual([false, false, false, false, true, false, false, true, true]);
    // A late record is the same record: its start still says when it was measured.
    expect(recs[4]!.start).toBe(recs[0]!.start! + 120);
  });

  it('sends corrupted records with badValues', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 19, 0, 0));
    const m = await started({ clock, intervalSec: 60, badValues: ['negative_voltage', 'not_json', 'ct_zero'] });
    clock.advance(180_000);
    const raw = await probe.waitForCount((x) => x.topic === `${m.base}/iv`, 3);
    expect(JSON.parse(raw[0]!.text).v[0]).toBeLessThan(0);
    expect(() => JSON.parse(raw[1]!.text)).toThrow();
    expect(JSON.parse(raw[2]!.text).ct).toBe(0);
    expect(m.sentRecords.map((s) => s.bad)).toEqual(['negative_voltage', 'not_json', 'ct_zero']);
  });
});
