import { SimClock, SimulatedMeter, type IntervalRecord } from '@fleet/device-sim';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { api, partnerWithKey } from './support/api';
import { e2eFleet } from './support/fleet-env';

/**
 * Meter data end to end: simulated meters (accelerated clocks, duplicates, late and
 * out-of-order records, bad values, a CT change, an energy reset through the API, a restart
 * with a new sid) → Mosquitto → mqtt-bridge → DEVICE_IN → meter → Postgres, read back through
 * the gateway and compared with values computed here from what the simulators sent.
 */

const SECRET = 'Meter-E2E-Secr3t';
let partner: Awaited<ReturnType<typeof partnerWithKey>>;
const meters: SimulatedMeter[] = [];
const clocks = new WeakMap<SimulatedMeter, SimClock>();
/** The meter's simulated time (epoch ms). */
const simNow = (meter: SimulatedMeter): number => (clocks.get(meter) as SimClock).now();

type Json = Record<string, unknown>;
const round6 = (x: number) => Math.round(x * 1e6) / 1e6;

beforeAll(async () => {
  partner = await partnerWithKey(['--permissions', 'device_provisioning,energy_read,energy_reset,system_control', '--access-all-devices']);
}, 60_000);

afterAll(async () => {
  await Promise.all(meters.map((m) => m.stop().catch(() => undefined)));
});

async function provision(product: 'meter' | 'light'): Promise<string> {
  const id = randomDeviceId();
  const res = await api('POST', `/v1/devices/${id}`, {
    key: partner.key,
    body: { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET, product },
  });
  expect(res.status).toBe(201);
  return id;
}

async function startMeter(options: Partial<ConstructorParameters<typeof SimulatedMeter>[0]> & { origin: number; speed: number }): Promise<SimulatedMeter> {
  const deviceId = await provision('meter');
  const { origin, speed, ...rest } = options;
  const clock = new SimClock({ speed, origin });
  const meter = new SimulatedMeter({ brokerUrl: e2eFleet().mqttUrl, deviceId, rootSecret: SECRET, clock, ...rest });
  meters.push(meter);
  clocks.set(meter, clock);
  await meter.start();
  return meter;
}

/** Every record through arrival mode (de-duplicated by sid and seq, as the spec says). */
async function allRecords(deviceId: string): Promise<Json[]> {
  const byKey = new Map<string, Json>();
  let cursor: string | undefined;
  let query = `received_since=2000-01-01T00:00:00Z&limit=1000`;
  for (;;) {
    const res = await api('GET', `/v1/meter/devices/${deviceId}/intervals?${cursor ? `cursor=${cursor}&limit=1000` : query}`, { key: partner.key });
    expect(res.status).toBe(200);
    for (const r of res.body.records as Json[]) byKey.set(`${String(r.sid)}/${String(r.seq)}/${String(r.received_at)}`, r);
    cursor = String(res.body.next_cursor);
    query = '';
    if (!res.body.has_more) break;
  }
  return [...byKey.values()];
}

/** What the simulator sent: each (sid, seq) once, with its payload. */
function sentOnce(meter: SimulatedMeter): Array<{ record: IntervalRecord; bad: boolean }> {
  const seen = new Map<string, { record: IntervalRecord; bad: boolean }>();
  for (const s of meter.sentRecords) seen.set(`${s.record.sid}/${s.record.seq}`, { record: s.record, bad: s.bad !== undefined });
  return [...seen.values()];
}

/** Consumption of one record, CT corrected, and whether it restarted the counter (computed from the protocol). */
function expectedEnergy(records: IntervalRecord[]): Map<IntervalRecord, { wh: number; reset: boolean }> {
  const out = new Map<IntervalRecord, { wh: number; reset: boolean }>();
  const bySid = new Map<string, IntervalRecord[]>();
  for (const r of records) bySid.set(r.sid, [...(bySid.get(r.sid) ?? []), r]);
  for (const list of bySid.values()) {
    list.sort((a, b) => a.seq - b.seq);
    let prev: IntervalRecord | undefined;
    for (const r of list) {
      if (r.e && r.n > 0) {
        const [first, last] = r.e;
        const within = last < first;
        const since = prev?.e ? first < prev.e[1] : false;
        out.set(r, { wh: (within ? last : last - first) / r.ct, reset: within || since });
      }
      prev = r;
    }
  }
  return out;
}

describe('a meter across the Berlin spring change, with duplicates, late records, a CT change, a reset and a restart', () => {
  let meter: SimulatedMeter;
  const origin = Date.parse('2026-03-28T21:00:00Z'); // 22:00 in Berlin

  beforeAll(async () => {
    meter = await startMeter({ origin, speed: 7200, intervalSec: 900, duplicateRecords: 0.3, lateRecords: true, loadW: 900, initialEnergyWh: 250_000 });
    await waitFor(() => simNow(meter) > Date.parse('2026-03-29T03:00:00Z'), { timeoutMs: 30_000, intervalMs: 100 });
    meter.setCtTurns(2);
    await waitFor(() => simNow(meter) > Date.parse('2026-03-29T09:00:00Z'), { timeoutMs: 30_000, intervalMs: 100 });
    const reset = await api('POST', `/v1/meter/devices/${meter.deviceId}/resetenergy`, { key: partner.key, body: { confirm: meter.deviceId } });
    expect(reset.status).toBe(202);
    const location = reset.headers.get('location') as string;
    const done = await waitFor(async () => {
      const r = await api('GET', location, { key: partner.key });
      return r.body.state !== 'pending' ? r.body : undefined;
    }, { timeoutMs: 15_000, what: 'the reset' });
    expect(done).toMatchObject({ state: 'done', result: 'ok', reason: null, at: expect.any(String) });
    await waitFor(() => simNow(meter) > Date.parse('2026-03-29T15:00:00Z'), { timeoutMs: 30_000, intervalMs: 100 });
    await meter.stop();
    await meter.start(); // a new sid, seq from 0
    await waitFor(() => simNow(meter) > Date.parse('2026-03-30T00:30:00Z'), { timeoutMs: 30_000, intervalMs: 100 });
    await meter.flushLate();
    await meter.stop();
    const expected = sentOnce(meter).length;
    await waitFor(async () => (await allRecords(meter.deviceId)).length >= expected, { timeoutMs: 30_000, intervalMs: 500, what: `${expected} records` });
  }, 120_000);

  test('every record is stored once, with the values the meter sent, CT corrected', async () => {
    const sent = sentOnce(meter).map((s) => s.record);
    const stored = await allRecords(meter.deviceId);
    expect(stored).toHaveLength(sent.length);
    expect(new Set(sent.map((r) => r.sid)).size).toBe(2);
    const byKey = new Map(stored.map((r) => [`${String(r.sid)}/${String(r.seq)}`, r]));
    const energy = expectedEnergy(sent);
    let resets = 0;
    let reconfigured = 0;
    for (const r of sent) {
      const s = byKey.get(`${r.sid}/${r.seq}`) as Json;
      expect(s).toBeDefined();
      expect(s.start_at).toBe(new Date((r.start as number) * 1000).toISOString());
      expect(s.time_quality).toBe('device');
      expect({ seq: r.seq, quarantined: s.quarantined, reason: s.quarantine_reason }).toEqual({ seq: r.seq, quarantined: false, reason: null });
      expect(s.ct_turns).toBe(r.ct);
      if (r.p) expect(s.power_w).toEqual({ avg: round6(r.p[0] / r.ct), min: round6(r.p[1] / r.ct), max: round6(r.p[2] / r.ct) });
      if (r.v) expect(s.voltage_v).toEqual({ avg: r.v[0], min: r.v[1], max: r.v[2] });
      const flags = s.flags as Json;
      expect(flags.energy_reset).toBe(energy.get(r)?.reset ?? false);
      if (flags.energy_reset) resets++;
      if (flags.meter_reconfigured) reconfigured++;
    }
    expect(resets).toBe(1);
    expect(reconfigured).toBe(1);
  });

  test('energy per Berlin day and hour, and the summary, match the records', async () => {
    const sent = sentOnce(meter).map((s) => s.record);
    const energy = expectedEnergy(sent);
    const dayStart = Date.parse('2026-03-28T23:00:00Z'); // 29 March 00:00 +01:00
    const dayEnd = Date.parse('2026-03-29T22:00:00Z'); // 30 March 00:00 +02:00
    const inDay = sent.filter((r) => (r.start as number) * 1000 >= dayStart && (r.start as number) * 1000 < dayEnd);
    const whDay = inDay.reduce((a, r) => a + (energy.get(r)?.wh ?? 0), 0);
    const q = `start=${new Date(dayStart).toISOString()}&end=${new Date(dayEnd).toISOString()}`;

    const day = await api('GET', `/v1/meter/devices/${meter.deviceId}/energy?bucket=day&tz=Europe/Berlin&${q}`, { key: partner.key });
    expect(day.status).toBe(200);
    expect(day.body.tz).toBe('Europe/Berlin');
    const points = day.body.points as Array<{ start_at: string; energy_wh: number; reset: boolean }>;
    expect(points.map((p) => p.start_at)).toEqual(['2026-03-29T00:00:00+01:00']);
    expect(points[0]?.energy_wh).toBeCloseTo(whDay, 4);
    expect(points[0]?.reset).toBe(true);
    const total = day.body.total as Json;
    expect(total).toMatchObject({ resets: 1, intervals: inDay.length, buckets: 1 });

    const hours = await api('GET', `/v1/meter/devices/${meter.deviceId}/energy?tz=Europe/Berlin&${q}`, { key: partner.key });
    const hourPoints = hours.body.points as Array<{ start_at: string; energy_wh: number | null }>;
    expect(hourPoints).toHaveLength(23);
    expect(hourPoints[1]?.start_at).toBe('2026-03-29T01:00:00+01:00');
    expect(hourPoints[2]?.start_at).toBe('2026-03-29T03:00:00+02:00');
    for (const [i, p] of hourPoints.entries()) {
      const from = dayStart + i * 3_600_000;
      const wh = inDay.filter((r) => (r.start as number) * 1000 >= from && (r.start as number) * 1000 < from + 3_600_000).reduce((a, r) => a + (energy.get(r)?.wh ?? 0), 0);
      if (p.energy_wh !== null) expect(p.energy_wh).toBeCloseTo(wh, 4);
    }

    const summary = await api('GET', `/v1/meter/devices/${meter.deviceId}/summary?${q}`, { key: partner.key });
    expect(summary.status).toBe(200);
    expect(summary.body.energy_wh).toEqual({ total: total.energy_wh, resets: 1, intervals: inDay.length });
    const carrying = inDay.filter((r) => r.n > 0 && r.p && (r.dur ?? 0) > 0);
    const avg = carrying.reduce((a, r) => a + ((r.p as number[])[0] as number) / r.ct * (r.dur as number), 0) / carrying.reduce((a, r) => a + (r.dur as number), 0);
    expect((summary.body.power_w as Json).avg).toBeCloseTo(avg, 5);
    expect(summary.body.coverage).toEqual({ records: inDay.length, quarantined: 0, seconds: inDay.reduce((a, r) => a + (r.dur as number), 0) });
  });

  test('pages by start time reproduce the records in (start, sid, seq) order', async () => {
    const sent = sentOnce(meter).map((s) => s.record);
    const want = [...sent].sort((a, b) => (a.start as number) - (b.start as number) || a.sid.localeCompare(b.sid) || a.seq - b.seq).map((r) => `${r.sid}/${r.seq}`);
    const got: string[] = [];
    let next: string | null = null;
    const first = `start=${origin / 1000}&end=${Date.parse('2026-03-31T00:00:00Z') / 1000}&limit=17`;
    do {
      const res: { status: number; body: Json } = await api('GET', `/v1/meter/devices/${meter.deviceId}/intervals?${next ? `cursor=${next}` : first}`, { key: partner.key });
      expect(res.status).toBe(200);
      for (const r of res.body.records as Json[]) got.push(`${String(r.sid)}/${String(r.seq)}`);
      next = res.body.next_cursor as string | null;
      expect(res.body.has_more).toBe(next !== null);
    } while (next);
    expect(got).toEqual(want);
  });
});

describe('a meter across the New York autumn change', () => {
  test('a 25-hour day; total null (not zero) where nothing carried a counter reading', async () => {
    const origin = Date.parse('2026-11-01T03:30:00Z');
    const meter = await startMeter({ origin, speed: 7200, intervalSec: 900, loadW: 400, ctTurns: 3 });
    await waitFor(() => simNow(meter) > Date.parse('2026-11-02T06:00:00Z'), { timeoutMs: 40_000, intervalMs: 100 });
    await meter.stop();
    const sent = sentOnce(meter).map((s) => s.record);
    await waitFor(async () => (await allRecords(meter.deviceId)).length >= sent.length, { timeoutMs: 30_000, intervalMs: 500 });
    const energy = expectedEnergy(sent);
    const dayStart = Date.parse('2026-11-01T04:00:00Z');
    const dayEnd = Date.parse('2026-11-02T05:00:00Z');
    const res = await api('GET', `/v1/meter/devices/${meter.deviceId}/energy?bucket=day&tz=America/New_York&start=${dayStart / 1000}&end=${dayEnd / 1000}`, { key: partner.key });
    expect(res.status).toBe(200);
    const points = res.body.points as Array<{ start_at: string; energy_wh: number }>;
    expect(points.map((p) => p.start_at)).toEqual(['2026-11-01T00:00:00-04:00']);
    const inDay = sent.filter((r) => (r.start as number) * 1000 >= dayStart && (r.start as number) * 1000 < dayEnd);
    expect(points[0]?.energy_wh).toBeCloseTo(inDay.reduce((a, r) => a + (energy.get(r)?.wh ?? 0), 0), 4);
    const hours = await api('GET', `/v1/meter/devices/${meter.deviceId}/energy?tz=America/New_York&start=${dayStart / 1000}&end=${dayEnd / 1000}`, { key: partner.key });
    expect((hours.body.points as unknown[]).length).toBe(25);
    const before = await api('GET', `/v1/meter/devices/${meter.deviceId}/energy?start=2026-10-01T00:00:00Z&end=2026-10-02T00:00:00Z`, { key: partner.key });
    expect(before.body.total).toBeNull();
  }, 120_000);
});

describe('live readings and energy resets through the broker', () => {
  test('sample: pending then done with the reading corrected for CT turns; one per 10 s; another device’s token is 404', async () => {
    const meter = await startMeter({ origin: Date.now() - 600_000, speed: 1, intervalSec: 900, ctTurns: 2, loadW: 600 });
    // Right after booting a meter has no snapshot to answer with (it would fail no_snapshot).
    await waitFor(() => meter.hasReading, { timeoutMs: 5000, what: 'the meter’s first reading' });
    const first = await waitFor(async () => {
      const res = await api('POST', `/v1/meter/devices/${meter.deviceId}/sample`, { key: partner.key });
      return res.status === 409 ? undefined : res;
    }, { timeoutMs: 15_000, intervalMs: 300, what: 'the meter to count as connected' });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ device_id: meter.deviceId, state: 'pending', token: expect.any(String), requested_at: expect.any(String) });
    expect(Number(first.body.timeout_s)).toBeLessThanOrEqual(30);
    const location = first.headers.get('location') as string;
    expect(location).toBe(`/v1/meter/devices/${meter.deviceId}/sample/${String(first.body.token)}`);

    const again = await api('POST', `/v1/meter/devices/${meter.deviceId}/sample`, { key: partner.key });
    expect(again.status).toBe(429);
    expect(Number(again.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(again.headers.get('retry-after'))).toBeLessThanOrEqual(10);

    const done = await waitFor(async () => {
      const r = await api('GET', location, { key: partner.key });
      return r.body.state !== 'pending' ? r.body : undefined;
    }, { timeoutMs: 10_000, intervalMs: 300, what: 'the live reading' });
    const answer = meter.sent.find((m) => m.sub === 'live');
    const live = JSON.parse((answer?.payload as Buffer).toString('utf8')) as { v: number; i: number; p: number; pf: number; f: number; ct: number; age_s: number };
    expect(done).toMatchObject({
      state: 'done',
      reason: null,
      reading: { link: 'ok', answered: true, voltage_v: live.v, current_a: round6(live.i / 2), power_w: round6(live.p / 2), frequency_hz: live.f, ct_turns: 2, age_s: live.age_s },
    });
    const other = await provision('meter');
    const foreign = await api('GET', `/v1/meter/devices/${other}/sample/${String(first.body.token)}`, { key: partner.key });
    expect(foreign.status).toBe(404);
    expect((await api('GET', `/v1/meter/devices/${meter.deviceId}/sample/${encodeURIComponent('never issued!')}`, { key: partner.key })).status).toBe(404);
    // However long: no token of that length was issued either.
    for (const what of ['sample', 'resetenergy']) expect((await api('GET', `/v1/meter/devices/${meter.deviceId}/${what}/${'s'.repeat(200)}`, { key: partner.key })).status).toBe(404);
    expect((await api('GET', `/v1/meter/devices/${meter.deviceId}/resetenergy/${String(first.body.token)}`, { key: partner.key })).status).toBe(404);
    await meter.stop();
  }, 60_000);

  test('sample: 409 device_offline with the connectivity fields for a meter that is not connected; failed with the meter’s reason', async () => {
    const offline = await provision('meter');
    const res = await api('POST', `/v1/meter/devices/${offline}/sample`, { key: partner.key });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'device_offline' });
    expect(Object.keys(res.body)).toEqual(expect.arrayContaining(['status', 'status_changed_at', 'last_seen_at']));

    const busy = await startMeter({ origin: Date.now() - 600_000, speed: 1, sampleError: 'busy' });
    const req = await waitFor(async () => {
      const r = await api('POST', `/v1/meter/devices/${busy.deviceId}/sample`, { key: partner.key });
      return r.status === 409 ? undefined : r;
    }, { timeoutMs: 15_000, intervalMs: 300 });
    expect(req.status).toBe(202);
    const failed = await waitFor(async () => {
      const r = await api('GET', req.headers.get('location') as string, { key: partner.key });
      return r.body.state !== 'pending' ? r.body : undefined;
    }, { timeoutMs: 10_000, intervalMs: 300 });
    expect(failed).toMatchObject({ state: 'failed', reason: 'busy', reading: null });
    await busy.stop();
  }, 60_000);

  test('resetenergy: 409 without the right confirm (mismatched, missing, no body); failed with the meter’s reason', async () => {
    const meter = await startMeter({ origin: Date.now() - 600_000, speed: 1, resetEnergyFailure: 'counter locked' });
    const resetPath = `/v1/meter/devices/${meter.deviceId}/resetenergy`;
    const acks: string[] = [];
    meter.on('ack', (line: string) => acks.push(line));
    // Mismatched, `{}`, no body at all, and an empty body sent as application/json.
    // The lower-case id differs from the id only when the id has a letter (a random id may have none).
    const lowerCase = meter.deviceId.toLowerCase() === meter.deviceId ? [] : [{ confirm: meter.deviceId.toLowerCase() }];
    for (const body of [{ confirm: 'nope' }, ...lowerCase, {}, undefined, '']) {
      const refused = await api('POST', resetPath, { key: partner.key, ...(body === undefined ? {} : { body }) });
      expect([refused.status, refused.body.code, body]).toEqual([409, 'confirmation_required', body]);
      expect(refused.body.request_id).toBe(refused.headers.get('x-request-id'));
    }
    // A confirm that is not even a string is mismatched too (409), as on DELETE /v1/devices/{device_id}.
    for (const confirm of [12, null, true, [meter.deviceId]]) {
      const wrongType = await api('POST', resetPath, { key: partner.key, body: { confirm } });
      expect([wrongType.status, wrongType.body.code, confirm]).toEqual([409, 'confirmation_required', confirm]);
    }
    const res = await api('POST', `/v1/meter/devices/${meter.deviceId}/resetenergy`, { key: partner.key, body: { confirm: meter.deviceId } });
    expect(res.status).toBe(202);
    const pending = await api('GET', res.headers.get('location') as string, { key: partner.key });
    expect(pending.status).toBe(200);
    const failed = await waitFor(async () => {
      const r = await api('GET', res.headers.get('location') as string, { key: partner.key });
      return r.body.state !== 'pending' ? r.body : undefined;
    }, { timeoutMs: 10_000, intervalMs: 300 });
    expect(failed).toMatchObject({ state: 'failed', result: 'failed', reason: 'counter locked', at: expect.any(String), requested_at: expect.any(String) });
    // Only the confirmed request reached the meter.
    expect(acks.filter((a) => a.startsWith('resetenergy>'))).toEqual([`resetenergy>token=${String(res.body.token)}>failed:counter locked`]);
    await meter.stop();
  }, 60_000);
});

describe('bad values, report, clears and light devices', () => {
  test('quarantined records are kept with a reason and null stats, and do not block the rest; payloads without sid and seq are not listed', async () => {
    const meter = await startMeter({ origin: Date.parse('2026-05-01T00:00:00Z'), speed: 3600, intervalSec: 900, badValues: true });
    await waitFor(() => meter.sentRecords.length >= 8, { timeoutMs: 30_000, intervalMs: 100 });
    meter.meterOpts.badValues = false;
    await waitFor(() => meter.sentRecords.filter((s) => !s.bad).length >= 2, { timeoutMs: 30_000, intervalMs: 100 });
    await meter.stop();
    // Not JSON, no sid, a seq as text: no interval record (the spec's seq and sid are never null), so never listed.
    const withoutIdentity = new Set(['not_json', 'missing_sid', 'string_numbers']);
    const listable = new Set(meter.sentRecords.filter((s) => !withoutIdentity.has(s.bad ?? '')).map((s) => s.payload)).size;
    const stored = await waitFor(async () => {
      const all = await allRecords(meter.deviceId);
      return all.length >= listable ? all : undefined;
    }, { timeoutMs: 20_000, intervalMs: 500, what: 'all records' });
    expect(stored).toHaveLength(listable);
    for (const r of stored) {
      expect(r.seq).toEqual(expect.any(Number));
      expect(r.sid).toMatch(/^[0-9a-f]{8}$/);
    }
    const quarantined = stored.filter((r) => r.quarantined);
    expect(quarantined.length).toBeGreaterThanOrEqual(4);
    for (const r of quarantined) {
      expect(r.quarantine_reason).toEqual(expect.any(String));
      expect([r.voltage_v, r.current_a, r.power_w, r.frequency_hz, r.power_factor, r.energy_wh]).toEqual([null, null, null, null, null, null]);
    }
    expect(new Set(quarantined.map((r) => r.quarantine_reason))).toEqual(new Set(['impossible_values', 'unusable_ct_turns', 'reads_exceed_duration']));
    const unknownTime = await api('GET', `/v1/meter/devices/${meter.deviceId}/intervals?unknown_time=true`, { key: partner.key });
    expect([unknownTime.status, unknownTime.body.records]).toEqual([200, []]);
    expect(stored.filter((r) => !r.quarantined).length).toBeGreaterThanOrEqual(2);
  }, 60_000);

  test('report: the partial record reaches the intervals route seconds later; a clear hides everything', async () => {
    const meter = await startMeter({ origin: Date.now() - 3_600_000, speed: 1, intervalSec: 900 });
    const res = await api('POST', `/v1/meter/devices/${meter.deviceId}/report`, { key: partner.key });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ topic: `meter/${meter.deviceId}/sys/exe`, payload: 'report>', command: 'report' });
    const partial = await waitFor(async () => {
      const page = await api('GET', `/v1/meter/devices/${meter.deviceId}/intervals`, { key: partner.key });
      return (page.body.records as Json[]).find((r) => (r.flags as Json).partial === true);
    }, { timeoutMs: 10_000, intervalMs: 300, what: 'the partial record' });
    expect(partial.seq).toBe(0);
    const bookmark = (await api('GET', `/v1/meter/devices/${meter.deviceId}/intervals?received_since=2000-01-01T00:00:00Z`, { key: partner.key })).body.next_cursor as string;

    const { execFile } = await import('node:child_process');
    const path = await import('node:path');
    const root = path.resolve(__dirname, '..');
    const out = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, [path.join(root, 'scripts', 'admin.js'), 'meter', 'clear', '--device', meter.deviceId], {
        cwd: root,
        env: { ...process.env, DATABASE_URL: `postgresql://postgres@127.0.0.1:5432/${e2eFleet().databasePrefix}meter` },
      }, (err, stdout) => (err ? reject(err) : resolve(stdout))),
    );
    expect(JSON.parse(out)).toMatchObject({ device_id: meter.deviceId, cleared_records: 1 });
    expect((await api('GET', `/v1/meter/devices/${meter.deviceId}/intervals`, { key: partner.key })).body.records).toEqual([]);
    const after = await api('GET', `/v1/meter/devices/${meter.deviceId}/intervals?cursor=${bookmark}`, { key: partner.key });
    expect(after.status).toBe(200);
    expect(after.body.records).toEqual([]);
    await meter.stop();
  }, 60_000);

  test('report and energy reset are commands to the meter: they spend from the per-device command limit', async () => {
    const id = await provision('meter');
    const sparing = await partnerWithKey(['--permissions', 'system_control,energy_reset', '--access-all-devices', '--device-commands-per-min', '1']);
    expect((await api('POST', `/v1/meter/devices/${id}/report`, { key: sparing.key })).status).toBe(202);
    for (const [route, body] of [['report', undefined], ['resetenergy', { confirm: id }]] as const) {
      const res = await api('POST', `/v1/meter/devices/${id}/${route}`, { key: sparing.key, ...(body ? { body } : {}) });
      expect([route, res.status, res.body.code]).toEqual([route, 429, 'rate_limited']);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
  });

  test('meter routes answer 404 for a light, and check permissions first', async () => {
    const light = await provision('light');
    for (const [method, route] of [
      ['GET', 'intervals'],
      ['GET', 'summary'],
      ['GET', 'energy'],
      ['POST', 'report'],
      ['POST', 'sample'],
    ] as const) {
      const res = await api(method, `/v1/meter/devices/${light}/${route}`, { key: partner.key });
      expect([route, res.status, res.body.code]).toEqual([route, 404, 'not_found']);
    }
    const reader = await partnerWithKey(['--permissions', 'energy_read', '--access-all-devices']);
    const res = await api('POST', `/v1/meter/devices/${light}/resetenergy`, { key: reader.key, body: { confirm: light } });
    expect(res.status).toBe(403);
    expect(res.body.required_permission).toBe('energy_reset');
  });
});
