import { fromBeforeClear } from '../src/domain/clears';
import { bucketLabel, bucketsFor, energyTotal, parseZone } from '../src/domain/energy';
import { parseTimeParam, ValidationError } from '@fleet/service-kit';
import { decodeCursor, encodeCursor, planIntervals, resolveWindow } from '../src/domain/query';
import { storedRow } from '../src/domain/ingest-plan';
import { deriveFields, parseRecord, QUARANTINE_REASONS } from '../src/domain/record';
import { parseAck, parseLive } from '../src/domain/requests';
import { summarizeRows, type SummaryRow } from '../src/domain/summary';
import { writeRecordPage } from '../src/domain/record-page';
import { LISTED_RECORD, RECORD_FIELDS } from '../src/domain/view';

const DEV = '0123456789AB';
const RECEIVED = new Date('2026-06-01T12:00:05Z');
const enc = (x: unknown): Uint8Array => Buffer.from(typeof x === 'string' ? x : JSON.stringify(x));
const good = {
  sid: '0a1b2c3d',
  seq: 42,
  start: Date.parse('2026-06-01T11:45:00Z') / 1000,
  clock: 'synced',
  dur: 900,
  n: 900,
  err: 0,
  v: [230.1, 228.4, 231.9],
  i: [1.21, 0.02, 3.5],
  p: [276.0, 2.0, 801.0],
  f: [50.0, 49.9, 50.1],
  pf: [0.97, 0.5, 0.99],
  e: [123456.7, 123525.6],
  ct: 1,
  alarms: 0,
  partial: false,
};

describe('interval record parsing', () => {
  it('keeps a good record, device time, values as sent with CT 1', () => {
    const r = parseRecord(DEV, enc(good), RECEIVED);
    expect(r.quarantined).toBe(false);
    expect(r.quarantineReason).toBeNull();
    expect(r.timeQuality).toBe('device');
    expect(r.startAt?.toISOString()).toBe('2026-06-01T11:45:00.000Z');
    expect(r.v).toEqual({ avg: 230.1, min: 228.4, max: 231.9 });
    expect(r.p).toEqual({ avg: 276, min: 2, max: 801 });
    expect(r.ctTurns).toBe(1);
  });

  it('divides current, power and energy by CT turns and rounds to 6 decimals', () => {
    const r = parseRecord(DEV, enc({ ...good, ct: 3, i: [1, 0.5, 2], p: [100, 10, 200] }), RECEIVED);
    expect(r.i).toEqual({ avg: 0.333333, min: 0.166667, max: 0.666667 });
    expect(r.p).toEqual({ avg: 33.333333, min: 3.333333, max: 66.666667 });
    expect(r.v).toEqual({ avg: 230.1, min: 228.4, max: 231.9 });
    const view = viewOf(r);
    expect(view.energy_wh).toEqual({ first: 41152.233333, last: 41175.2 });
    expect(view.ct_turns).toBe(3);
  });

  it('treats an absent ct as 1', () => {
    const { ct: _ct, ...noCt } = good;
    expect(parseRecord(DEV, enc(noCt), RECEIVED).ctTurns).toBe(1);
  });

  it('derives the start of a free-running clock from the receive time and uptimes', () => {
    const { start: _s, ...rest } = good;
    const r = parseRecord(DEV, enc({ ...rest, clock: 'free', start: null, up: 1000, up_now: 1905 }), RECEIVED);
    expect(r.quarantined).toBe(false);
    expect(r.timeQuality).toBe('derived');
    expect(r.startAt?.toISOString()).toBe(new Date(RECEIVED.getTime() - 905_000).toISOString());
  });

  it('has no start when the clock is none', () => {
    const r = parseRecord(DEV, enc({ ...good, clock: 'none', start: null }), RECEIVED);
    expect(r.quarantined).toBe(false);
    expect(r.timeQuality).toBe('unknown');
    expect(r.startAt).toBeNull();
  });

  it('has no stats when there were no good reads', () => {
    const r = parseRecord(DEV, enc({ ...good, n: 0, err: 900, v: null, i: null, p: null, f: null, pf: null, e: null }), RECEIVED);
    expect(r.quarantined).toBe(false);
    expect(r.v).toBeNull();
    expect(r.eFirstRaw).toBeNull();
  });

  const cases: Array<[string, unknown, string]> = [
    ['not JSON', `${JSON.stringify(good).slice(0, 40)}\u0000garbage`, 'malformed_payload'],
    ['a JSON array', [1, 2], 'malformed_payload'],
    ['no sid', { ...good, sid: undefined }, 'invalid_identity'],
    ['a string seq', { ...good, seq: '42' }, 'invalid_identity'],
    ['string numbers', { ...good, v: ['230.1', '228.4', '231.9'] }, 'malformed_fields'],
    ['a stat of two numbers', { ...good, p: [1, 2] }, 'malformed_fields'],
    ['ct zero', { ...good, ct: 0 }, 'unusable_ct_turns'],
    ['ct fractional', { ...good, ct: 1.5 }, 'unusable_ct_turns'],
    ['an unknown clock', { ...good, clock: 'gps' }, 'invalid_clock'],
    ['synced without a start', { ...good, start: null }, 'invalid_clock'],
    ['negative voltage', { ...good, v: [-231.5, -240, -220] }, 'impossible_values'],
    ['power factor above one', { ...good, pf: [1.7, 1.2, 2.5] }, 'impossible_values'],
    ['a negative power factor', { ...good, pf: [-0.9, -0.95, -0.8] }, 'impossible_values'],
    ['min above max', { ...good, f: [50, 51, 49] }, 'impossible_values'],
    ['more reads than seconds', { ...good, n: 1000 }, 'reads_exceed_duration'],
    ['a start in the future', { ...good, start: RECEIVED.getTime() / 1000 + 3600 }, 'start_in_future'],
  ];
  it.each(cases)('quarantines %s', (_what, payload, reason) => {
    const r = parseRecord(DEV, enc(payload), RECEIVED);
    expect(r.quarantined).toBe(true);
    expect(r.quarantineReason).toBe(reason);
    expect(QUARANTINE_REASONS).toContain(reason);
    expect([r.v, r.i, r.p, r.f, r.pf, r.eFirstRaw]).toEqual([null, null, null, null, null, null]);
  });

  it('keys a record without identity by its payload, so a repeat is the same record', () => {
    const a = parseRecord(DEV, enc('garbage'), RECEIVED);
    const b = parseRecord(DEV, enc('garbage'), RECEIVED);
    const c = parseRecord(DEV, enc('other garbage'), RECEIVED);
    expect(a.sid).toBe(b.sid);
    expect(a.sid).not.toBe(c.sid);
    expect(a.seq).toBe(-1);
    // Keyed '#<hash>': LISTED_RECORD leaves it out of every listing (the spec's sid and seq are never null).
    expect(a.sid).toMatch(/^#[0-9a-f]{16}$/);
    expect(LISTED_RECORD).toBe("sid NOT LIKE '#%'");
  });

  it('shows a quarantined record with an unusable CT as ct_turns null', () => {
    const r = parseRecord(DEV, enc({ ...good, ct: 0 }), RECEIVED);
    expect(r.ctTurns).toBeNull();
    expect(r.startAt?.toISOString()).toBe('2026-06-01T11:45:00.000Z');
  });
});

describe('flags from the previous record', () => {
  const rec = (first: number, last: number, ct = 1) => ({ quarantined: false, eFirstRaw: first, eLastRaw: last, ctTurns: ct });
  it('uses last - first divided by CT turns', () => {
    expect(deriveFields(rec(100, 160, 2), { eLastRaw: 99, ctTurns: 2 })).toEqual({ energyReset: false, meterReconfigured: false, energyUsedWh: 30 });
  });
  it('flags a reset when the counter went backwards since the previous record', () => {
    expect(deriveFields(rec(0.5, 20), { eLastRaw: 5000, ctTurns: 1 })).toEqual({ energyReset: true, meterReconfigured: false, energyUsedWh: 19.5 });
  });
  it('flags a reset inside the record and counts from zero', () => {
    expect(deriveFields(rec(5000, 12), { eLastRaw: 4990, ctTurns: 1 })).toEqual({ energyReset: true, meterReconfigured: false, energyUsedWh: 12 });
  });
  it('never reports a CT change as a reset', () => {
    expect(deriveFields(rec(1000, 1300, 3), { eLastRaw: 999, ctTurns: 1 })).toEqual({ energyReset: false, meterReconfigured: true, energyUsedWh: 100 });
  });
  it('has no flags for the first record of a stream', () => {
    expect(deriveFields(rec(10, 20), null)).toEqual({ energyReset: false, meterReconfigured: false, energyUsedWh: 10 });
  });
});

describe('times and cursors', () => {
  it('reads ISO 8601 and epoch seconds', () => {
    expect(parseTimeParam('2026-06-01T12:00:00Z', 'start').toISOString()).toBe('2026-06-01T12:00:00.000Z');
    expect(parseTimeParam('2026-06-01T14:00:00+02:00', 'start').toISOString()).toBe('2026-06-01T12:00:00.000Z');
    expect(parseTimeParam('1780315200', 'start').toISOString()).toBe('2026-06-01T12:00:00.000Z');
    expect(() => parseTimeParam('yesterday', 'start')).toThrow(ValidationError);
    expect(() => parseTimeParam('2026-13-01T00:00:00Z', 'end')).toThrow("invalid 'end'");
  });

  it('round-trips URL-safe cursors and refuses another device’s or a tampered one', () => {
    const c = encodeCursor({ m: 's', d: DEV, s: 1, e: 2000, u: false, k: [1000, '0a1b2c3d', 7] });
    expect(c).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(c, DEV)).toEqual({ m: 's', d: DEV, s: 1, e: 2000, u: false, k: [1000, '0a1b2c3d', 7] });
    expect(() => decodeCursor(c, 'FFFFFFFFFFFF')).toThrow("invalid 'cursor'");
    expect(() => decodeCursor(`${c}x`, DEV)).toThrow("invalid 'cursor'");
    expect(() => decodeCursor('not a cursor!', DEV)).toThrow("invalid 'cursor'");
  });

  it('keeps every time inside 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59Z', () => {
    expect(parseTimeParam('1970-01-01T00:00:00Z', 'start').getTime()).toBe(0);
    expect(parseTimeParam('0', 'start').getTime()).toBe(0);
    expect(parseTimeParam('9999-12-31T23:59:59Z', 'end').toISOString()).toBe('9999-12-31T23:59:59.000Z');
    expect(parseTimeParam('253402300799', 'end').toISOString()).toBe('9999-12-31T23:59:59.000Z');
    for (const outside of ['-271821-04-20T00:00:00Z', '-004714-01-01T00:00:00Z', '1969-12-31T23:59:59Z', '-1', '253402300800', '+010000-01-01T00:00:00Z', '+275760-09-13T00:00:00Z']) {
      expect(() => parseTimeParam(outside, 'received_since')).toThrow("invalid 'received_since': outside the supported range");
    }
  });

  it('refuses a cursor whose window or key lies outside what the service issues', () => {
    const cursor = (s: number, e: number, k0: number | null, sid = '0a1b2c3d') => encodeCursor({ m: 's', d: DEV, s, e, u: false, k: [k0, sid, 1] });
    expect(() => decodeCursor(cursor(-8.64e15, 0, -1), DEV)).toThrow("invalid 'cursor'");
    expect(() => decodeCursor(cursor(0, 8.64e15, 1), DEV)).toThrow("invalid 'cursor'");
    expect(() => decodeCursor(cursor(1000, 2000, 5000), DEV)).toThrow("invalid 'cursor'");
    expect(() => decodeCursor(cursor(1000, 2000, 1500, 'a\u0000b'), DEV)).toThrow("invalid 'cursor'");
    expect(decodeCursor(cursor(-86_400_000, 0, -1), DEV)).toMatchObject({ s: -86_400_000 });
    expect(decodeCursor(cursor(1000, 2000, 1500, '#00ff'), DEV)).toMatchObject({ k: [1500, '#00ff', 1] });
  });

  const now = new Date('2026-06-02T00:00:00Z');
  it('defaults to the 24 hours before now, limit 200', () => {
    const plan = planIntervals({}, DEV, now);
    expect(plan).toEqual({ mode: 'start', window: { start: new Date('2026-06-01T00:00:00Z'), end: now }, unknownTime: false, after: null, limit: 200 });
  });

  it('takes the window from the cursor and refuses different values beside it', () => {
    const cursor = encodeCursor({ m: 's', d: DEV, s: Date.parse('2026-05-01T00:00:00Z'), e: Date.parse('2026-05-02T00:00:00Z'), u: false, k: [Date.parse('2026-05-01T06:00:00Z'), 'a', 1] });
    const plan = planIntervals({ cursor }, DEV, now);
    expect(plan.mode === 'start' && plan.window.start.toISOString()).toBe('2026-05-01T00:00:00.000Z');
    expect(planIntervals({ cursor, start: '2026-05-01T00:00:00Z', end: String(Date.parse('2026-05-02T00:00:00Z') / 1000) }, DEV, now).mode).toBe('start');
    expect(() => planIntervals({ cursor, start: '2026-05-01T00:00:01Z' }, DEV, now)).toThrow("invalid 'start'");
    expect(() => planIntervals({ cursor, unknown_time: 'true' }, DEV, now)).toThrow("invalid 'unknown_time'");
    expect(() => planIntervals({ cursor, received_since: '2026-05-01T00:00:00Z' }, DEV, now)).toThrow(ValidationError);
  });

  it('takes a summary window of at most one calendar year, leap day or not', () => {
    const window = (start: string, end: string) => () => resolveWindow({ start, end }, now, 'one year');
    expect(window('2026-01-01T00:00:00Z', '2027-01-01T00:00:00Z')).not.toThrow();
    expect(window('2026-01-01T00:00:00Z', '2027-01-01T00:00:01Z')).toThrow('at most one year');
    // 366 days is a year only when it holds a leap day.
    expect(window('2026-03-01T00:00:00Z', '2027-03-02T00:00:00Z')).toThrow(ValidationError);
    expect(window('2027-03-01T00:00:00Z', '2028-03-01T00:00:00Z')).not.toThrow();
    expect(window('2028-02-29T00:00:00Z', '2029-03-01T00:00:00Z')).not.toThrow();
    expect(window('2028-02-29T00:00:00Z', '2029-03-01T00:00:01Z')).toThrow(ValidationError);
  });

  it('refuses mixed modes, a range over the cap and bad limits', () => {
    expect(() => planIntervals({ received_since: '2026-05-01T00:00:00Z', start: '2026-05-01T00:00:00Z' }, DEV, now)).toThrow(ValidationError);
    const bookmark = encodeCursor({ m: 'r', d: DEV, ep: 'x', a: 5 });
    expect(() => planIntervals({ cursor: bookmark, unknown_time: 'false' }, DEV, now)).toThrow(ValidationError);
    expect(planIntervals({ cursor: bookmark, received_since: 'ignored' }, DEV, now)).toEqual({ mode: 'received', receivedSince: null, afterArrival: 5, epoch: 'x', limit: 200 });
    expect(() => planIntervals({ start: '2025-01-01T00:00:00Z', end: '2026-06-01T00:00:00Z' }, DEV, now)).toThrow('366 days');
    expect(() => planIntervals({ limit: '1001' }, DEV, now)).toThrow("invalid 'limit'");
    expect(() => planIntervals({ limit: '0' }, DEV, now)).toThrow("invalid 'limit'");
    expect(() => planIntervals({ start: '2026-06-01T00:00:00Z', end: '2026-06-01T00:00:00Z' }, DEV, now)).toThrow(ValidationError);
  });
});

describe('energy buckets', () => {
  const hours = (b: { start: number; end: number }) => (b.end - b.start) / 3_600_000;

  it('makes a 23-hour and a 25-hour day in Europe/Berlin', () => {
    const spring = bucketsFor(new Date('2026-03-28T23:00:00Z'), new Date('2026-03-30T22:00:00Z'), 'day', 'Europe/Berlin');
    expect(spring.map(bucketLabel)).toEqual(['2026-03-29T00:00:00+01:00', '2026-03-30T00:00:00+02:00']);
    expect(spring.map(hours)).toEqual([23, 24]);
    const autumn = bucketsFor(new Date('2026-10-24T22:00:00Z'), new Date('2026-10-25T23:00:00Z'), 'day', 'Europe/Berlin');
    expect(autumn.map(bucketLabel)).toEqual(['2026-10-25T00:00:00+02:00']);
    expect(autumn.map(hours)).toEqual([25]);
  });

  it('makes a 23-hour and a 25-hour day in America/New_York', () => {
    const spring = bucketsFor(new Date('2026-03-08T05:00:00Z'), new Date('2026-03-09T04:00:00Z'), 'day', 'America/New_York');
    expect(spring.map((b) => [bucketLabel(b), hours(b)])).toEqual([['2026-03-08T00:00:00-05:00', 23]]);
    const autumn = bucketsFor(new Date('2026-11-01T04:00:00Z'), new Date('2026-11-02T05:00:00Z'), 'day', 'America/New_York');
    expect(autumn.map((b) => [bucketLabel(b), hours(b)])).toEqual([['2026-11-01T00:00:00-04:00', 25]]);
  });

  it('has 25 hour buckets on the autumn day, the repeated hour written with each offset', () => {
    const b = bucketsFor(new Date('2026-10-24T22:00:00Z'), new Date('2026-10-25T23:00:00Z'), 'hour', 'Europe/Berlin');
    expect(b).toHaveLength(25);
    expect(b.every((x) => hours(x) === 1)).toBe(true);
    expect(b.slice(2, 5).map((x) => bucketLabel(x))).toEqual(['2026-10-25T02:00:00+02:00', '2026-10-25T02:00:00+01:00', '2026-10-25T03:00:00+01:00']);
  });

  it('aligns hours of a half-hour zone to its local hours', () => {
    const b = bucketsFor(new Date('2026-06-01T00:00:00Z'), new Date('2026-06-01T02:00:00Z'), 'hour', 'Asia/Kolkata');
    expect(b.map((x) => new Date(x.start).toISOString())).toEqual(['2026-05-31T23:30:00.000Z', '2026-06-01T00:30:00.000Z', '2026-06-01T01:30:00.000Z']);
    expect((b[0] && bucketLabel(b[0]))).toBe('2026-06-01T05:00:00+05:30');
  });

  const minutes = (b: { start: number; end: number }) => (b.end - b.start) / 60_000;
  const hourBuckets = (start: string, end: string, zone: string) => bucketsFor(new Date(start), new Date(end), 'hour', zone).map((b) => [bucketLabel(b), minutes(b)]);

  it("cuts the hour of Lord Howe's 30-minute change at the change: the hour it skips is 30 minutes, the half hour it repeats a bucket of its own", () => {
    // Spring: 02:00+10:30 becomes 02:30+11:00 (15:30 UTC).
    expect(hourBuckets('2026-10-03T14:30:00Z', '2026-10-03T16:30:00Z', 'Australia/Lord_Howe')).toEqual([
      ['2026-10-04T01:00:00+10:30', 60],
      ['2026-10-04T02:30:00+11:00', 30],
      ['2026-10-04T03:00:00+11:00', 60],
    ]);
    // Autumn: 02:00+11:00 becomes 01:30+10:30 (15:00 UTC); 01:30 to 02:00 comes twice, once with each offset.
    expect(hourBuckets('2026-04-04T14:00:00Z', '2026-04-04T16:30:00Z', 'Australia/Lord_Howe')).toEqual([
      ['2026-04-05T01:00:00+11:00', 60],
      ['2026-04-05T01:30:00+10:30', 30],
      ['2026-04-05T02:00:00+10:30', 60],
    ]);
  });

  it('starts with the bucket holding the start, also when that bucket begins at an offset change', () => {
    expect(hourBuckets('2026-10-03T15:45:00Z', '2026-10-03T16:30:00Z', 'Australia/Lord_Howe')).toEqual([
      ['2026-10-04T02:30:00+11:00', 30],
      ['2026-10-04T03:00:00+11:00', 60],
    ]);
    expect(bucketsFor(new Date('2026-04-04T15:10:00Z'), new Date('2026-04-04T15:20:00Z'), 'hour', 'Australia/Lord_Howe').map((b) => new Date(b.start).toISOString())).toEqual([
      '2026-04-04T15:00:00.000Z',
    ]);
  });

  it('cuts hours at historical changes of odd size: Kathmandu +05:30 to +05:45 (1986), Monrovia -00:44:30 to UTC (1972)', () => {
    expect(hourBuckets('1985-12-31T17:30:00Z', '1985-12-31T20:00:00Z', 'Asia/Kathmandu')).toEqual([
      ['1985-12-31T23:00:00+05:30', 60],
      ['1986-01-01T00:15:00+05:45', 45],
      ['1986-01-01T01:00:00+05:45', 60],
    ]);
    expect(hourBuckets('1972-01-06T23:44:30Z', '1972-01-07T02:00:00Z', 'Africa/Monrovia')).toEqual([
      ['1972-01-06T23:00:00-00:44:30', 60],
      ['1972-01-07T00:44:30+00:00', 15.5],
      ['1972-01-07T01:00:00+00:00', 60],
    ]);
  });

  it('uses UTC without a zone and refuses 2000 buckets or more', () => {
    const b = bucketsFor(new Date('2026-06-01T00:30:00Z'), new Date('2026-06-01T02:00:00Z'), 'hour', undefined);
    expect(b.map(bucketLabel)).toEqual(['2026-06-01T00:00:00Z', '2026-06-01T01:00:00Z']);
    expect(bucketsFor(new Date(0), new Date(1999 * 3_600_000), 'hour', undefined)).toHaveLength(1999);
    expect(() => bucketsFor(new Date(0), new Date(2000 * 3_600_000), 'hour', undefined)).toThrow(ValidationError);
    expect(() => parseZone('Mars/Olympus')).toThrow("invalid 'tz'");
    expect(() => bucketsFor(new Date(8.6e15), new Date(8.64e15), 'day', undefined)).toThrow(ValidationError);
    expect(parseZone('Europe/Berlin')).toBe('Europe/Berlin');
  });

  it('writes a null total without a counter reading', () => {
    expect(energyTotal({ energyWh: null, intervals: 0, resets: 0 }, 3)).toBeNull();
    expect(energyTotal({ energyWh: 0, intervals: 4, resets: 0 }, 3)).toEqual({ energy_wh: 0, resets: 0, intervals: 4, buckets: 3 });
  });
});

describe('summary arithmetic', () => {
  const row = (over: Partial<SummaryRow> & { p?: [number, number, number]; pf?: [number, number, number] | null }): SummaryRow => {
    const st = (t: [number, number, number] | null | undefined) => (t ? { avg: t[0], min: t[1], max: t[2] } : null);
    return {
      quarantined: false,
      durationS: 900,
      readsN: 900,
      ctTurns: 1,
      stats: { voltage_v: st([230, 229, 231]), current_a: st([1, 0.5, 2]), power_w: st(over.p ?? [200, 100, 300]), frequency_hz: st([50, 49.9, 50.1]), power_factor: st(over.pf === undefined ? [0.9, 0.8, 1] : over.pf) },
      ...over,
    };
  };
  it('weights averages by duration and takes extremes', () => {
    const s = summarizeRows([row({ durationS: 900, p: [100, 50, 150] }), row({ durationS: 300, p: [400, 390, 410] })]);
    // (100*900 + 400*300) / 1200 = 175
    expect(s.power_w).toEqual({ avg: 175, min: 50, max: 410, intervals: 2, seconds: 1200 });
    expect(s.coverage).toEqual({ records: 2, quarantined: 0, seconds: 1200 });
  });
  it('leaves out quarantined, zero-read and zero-duration records, and pf without a load', () => {
    const s = summarizeRows([
      row({ quarantined: true, durationS: 900 }),
      row({ readsN: 0 }),
      row({ durationS: 0 }),
      row({ p: [1, 0.5, 2.4], ctTurns: 2, pf: [0.5, 0.4, 0.6] }), // 2.4 x 2 = 4.8 W: no load
      row({ p: [1, 0.5, 2.5], ctTurns: 2, pf: [0.7, 0.6, 0.8] }), // 5 W: load
    ]);
    expect(s.coverage).toEqual({ records: 5, quarantined: 1, seconds: 2700 });
    expect(s.power_factor).toEqual({ avg: 0.7, min: 0.6, max: 0.8, intervals: 1, seconds: 900 });
    expect(s.voltage_v?.intervals).toBe(2);
    expect(summarizeRows([]).voltage_v).toBeNull();
  });
});

describe('acknowledgements and live answers', () => {
  it('parses reset acknowledgements with and without a readable token', () => {
    expect(parseAck('resetenergy>token=r_1>ok')).toEqual({ verb: 'resetenergy', token: 'r_1', result: 'ok', reason: null });
    expect(parseAck('resetenergy>token=r_1>duplicate')).toEqual({ verb: 'resetenergy', token: 'r_1', result: 'duplicate', reason: null });
    expect(parseAck('resetenergy>token=r_1>failed:locked')).toEqual({ verb: 'resetenergy', token: 'r_1', result: 'failed', reason: 'locked' });
    expect(parseAck('resetenergy>>failed:unreadable token')).toEqual({ verb: 'resetenergy', token: null, result: 'failed', reason: 'unreadable token' });
    expect(parseAck('log>booted')).toBeNull();
    expect(parseAck('query>ok')).toBeNull();
  });

  it('corrects a live reading for CT turns and keeps errors as reasons', () => {
    const at = new Date('2026-06-01T00:00:01.250Z');
    const out = parseLive(enc({ token: 't_1', link: 'ok', v: 230.2, i: 2.6, p: 580, pf: 0.97, f: 50, ct: 2, age_s: 0.4 }), at, () => new Date('2026-06-01T00:00:00Z'));
    expect(out).toEqual({
      token: 't_1',
      state: 'done',
      reading: { link: 'ok', answered: true, voltage_v: 230.2, current_a: 1.3, power_w: 290, power_factor: 0.97, frequency_hz: 50, ct_turns: 2, age_s: 0.4, taken_at: at.toISOString(), took_s: 1.25 },
    });
    expect(parseLive(enc({ token: 't_1', error: 'busy' }), at, () => undefined)).toEqual({ token: 't_1', state: 'failed', reason: 'busy' });
    expect(parseLive(enc({ token: 't_1', link: 'timeout', v: null }), at, () => undefined)).toMatchObject({ reading: { link: 'timeout', answered: false, voltage_v: null } });
    expect(parseLive(enc('junk'), at, () => undefined)).toBeNull();
    expect(parseLive(enc({ token: 't_2', link: 'ok', v: 230, i: 0, p: 0, pf: 0, f: 50, ct: 1, age_s: 0.2 }), at, () => undefined)).toMatchObject({ reading: { power_factor: null, power_w: 0 } });
  });
});

/** The record as the store keeps it (its insert row) and lists it (an array of RECORD_FIELDS). */
function viewOf(r: ReturnType<typeof parseRecord>): Record<string, unknown> {
  const row: Record<string, unknown> = { arrival_seq: 1, ...storedRow(r, deriveFields(r, null)) };
  const valueOf = (f: (typeof RECORD_FIELDS)[number]): unknown =>
    f === 'start_ms' ? (r.startAt?.getTime() ?? null) : f === 'received_ms' ? r.receivedAt.getTime() : row[f];
  const fields = RECORD_FIELDS.map((f) => {
    const v = valueOf(f);
    return typeof v === 'boolean' ? Number(v) : (v as string | number | null);
  });
  const page = writeRecordPage(JSON.stringify([fields]), 1, { before: {}, after: () => ({}) });
  return (JSON.parse(page.body.toString('utf8')) as { records: Array<Record<string, unknown>> }).records[0] as Record<string, unknown>;
}

describe('records from before a clear', () => {
  const mark = { clearedAt: new Date('2026-06-01T12:00:00Z'), streams: { aaaaaaaa: 10 }, maxStartAt: new Date('2026-01-01T10:00:00Z') };
  const rec = (sid: string, seq: number, start: string | null, received = '2026-06-01T12:00:01Z', durationS: number | null = 900) => ({
    sid,
    seq,
    startAt: start ? new Date(start) : null,
    durationS,
    receivedAt: new Date(received),
  });
  it('tells by the stream, then by the meter clock, then by arrival', () => {
    expect(fromBeforeClear(rec('aaaaaaaa', 10, '2026-01-01T10:00:00Z'), mark)).toBe(true); // a repeat
    expect(fromBeforeClear(rec('aaaaaaaa', 7, null), mark)).toBe(true); // late, no clock
    expect(fromBeforeClear(rec('aaaaaaaa', 11, '2026-01-01T10:15:00Z'), mark)).toBe(false); // the next interval
    expect(fromBeforeClear(rec('bbbbbbbb', 0, '2026-01-01T10:30:00Z'), mark)).toBe(false); // a new stream
    expect(fromBeforeClear(rec('cccccccc', 3, '2026-01-01T09:00:00Z'), mark)).toBe(true); // an older stream's late record
    expect(fromBeforeClear(rec('#0011223344556677', -1, null, '2026-06-01T11:59:59Z'), mark)).toBe(true);
    expect(fromBeforeClear(rec('#0011223344556677', -1, null, '2026-06-01T12:00:01Z'), mark)).toBe(false);
    expect(fromBeforeClear(rec('dddddddd', 0, null), mark)).toBe(false);
  });

  it('tells a record made before the clear and sent after it by its end on the meter clock', () => {
    // The meter's clock read 11:00 when the clear was made at 12:00: an hour behind ours.
    const clocked = { ...mark, meterClockAtClear: new Date('2026-06-01T11:00:00Z') };
    expect(fromBeforeClear(rec('aaaaaaaa', 11, '2026-06-01T10:30:00Z'), clocked)).toBe(true); // ended 10:45, buffered while offline
    expect(fromBeforeClear(rec('aaaaaaaa', 12, '2026-06-01T10:45:00Z'), clocked)).toBe(true); // ended 11:00, as the clear came
    expect(fromBeforeClear(rec('aaaaaaaa', 13, '2026-06-01T10:50:00Z'), clocked)).toBe(false); // running at the clear
    expect(fromBeforeClear(rec('eeeeeeee', 0, '2026-06-01T10:00:00Z'), clocked)).toBe(true); // a stream the platform never saw, all before the clear
    expect(fromBeforeClear(rec('eeeeeeee', 1, '2026-06-01T11:00:00Z'), clocked)).toBe(false);
    expect(fromBeforeClear(rec('aaaaaaaa', 14, '2026-06-01T10:30:00Z', undefined, null), clocked)).toBe(false); // no duration: not known to have ended
    // Without the estimate (a clear made before it was kept), as before.
    expect(fromBeforeClear(rec('aaaaaaaa', 11, '2026-06-01T10:30:00Z'), mark)).toBe(false);
  });
});

describe('day buckets against luxon calendar arithmetic', () => {
  it.each(['Europe/Berlin', 'America/New_York', 'Asia/Kolkata', 'Australia/Lord_Howe', 'America/Santiago', 'America/Havana', 'Pacific/Apia', 'UTC'])('%s over two years', async (zone) => {
    const { DateTime } = await import('luxon');
    const buckets = bucketsFor(new Date('2025-01-01T00:00:00Z'), new Date('2026-12-31T00:00:00Z'), 'day', zone);
    let at = DateTime.fromISO('2025-01-01T00:00:00Z', { zone }).startOf('day');
    for (const b of buckets) {
      expect(b.start).toBe(at.toMillis());
      at = at.plus({ days: 1 }).startOf('day');
      expect(b.end).toBe(at.toMillis());
    }
  });
});
