/**
 * The page writer (domain/record-page.ts) against the Meter interval record of the spec, built as
 * objects and serialized by JSON.stringify (reference-view.ts): the same bytes for any record
 * text, how many records it takes, whether more followed and the last record's key.
 */
import { writeRecordPage } from '../src/domain/record-page';
import { RECORD_FIELDS } from '../src/domain/view';
import { referencePage, type FieldValue } from './reference-view';
import { seededRandom } from './seeded-random';

/** A record array with every field set, then `changes` applied. */
function recordArray(changes: Partial<Record<(typeof RECORD_FIELDS)[number], FieldValue>> = {}): FieldValue[] {
  const base: Record<string, FieldValue> = {
    arrival_seq: 7,
    sid: '0a1b2c3d',
    seq: 42,
    start_ms: Date.parse('2026-06-01T11:45:00Z'),
    time_quality: 'synced',
    duration_s: 900,
    reads_n: 900,
    reads_err: 0,
    v_avg: 230.1, v_min: 228.4, v_max: 231.9,
    i_avg: 1.21, i_min: 0.02, i_max: 3.5,
    p_avg: 276, p_min: 2, p_max: 801,
    f_avg: 50, f_min: 49.9, f_max: 50.1,
    pf_avg: 0.97, pf_min: 0.5, pf_max: 0.99,
    e_first_raw: 246913.4, e_last_raw: 247051.2,
    ct_turns: 2,
    alarm_reads: 0,
    partial: 0, energy_reset: 0, meter_reconfigured: 1, quarantined: 0,
    quarantine_reason: null,
    received_ms: Date.parse('2026-06-01T12:00:05.123Z'),
    ...changes,
  };
  return RECORD_FIELDS.map((f) => base[f] as FieldValue);
}

/** A page's text as Postgres writes it: arrays, numbers in `numberText`'s notation. */
const pageText = (records: FieldValue[][], numberText: (x: number) => string = String): string =>
  `[${records.map((r) => `[${r.map((v) => (typeof v === 'number' ? numberText(v) : JSON.stringify(v))).join(',')}]`).join(',')}]`;

/** A float as Postgres writes it: an exponent from 1e15 and below 1e-4 (JavaScript: from 1e21 and below 1e-6), and -0. */
function postgresNumber(x: number): string {
  if (Object.is(x, -0)) return '-0';
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-4 || a >= 1e15)) return x.toExponential().replace(/e([+-])(\d)$/, 'e$10$2');
  return String(x);
}

/** A page written into a body of nothing else, and the page's records array as text. */
const write = (text: string, limit: number) => writeRecordPage(text, limit, { before: {}, after: () => ({}) });
const written = (text: string, limit = 1000): string => {
  const body = write(text, limit).body.toString('utf8');
  expect(body.startsWith('{"records":') && body.endsWith('}')).toBe(true);
  return body.slice('{"records":'.length, -1);
};

it('writes a record as the spec shows it', () => {
  const page = JSON.parse(written(pageText([recordArray()]))) as Array<Record<string, unknown>>;
  expect(page).toEqual([
    {
      seq: 42,
      sid: '0a1b2c3d',
      start_at: '2026-06-01T11:45:00.000Z',
      time_quality: 'synced',
      duration_s: 900,
      reads: { n: 900, err: 0 },
      voltage_v: { avg: 230.1, min: 228.4, max: 231.9 },
      current_a: { avg: 1.21, min: 0.02, max: 3.5 },
      power_w: { avg: 276, min: 2, max: 801 },
      frequency_hz: { avg: 50, min: 49.9, max: 50.1 },
      power_factor: { avg: 0.97, min: 0.5, max: 0.99 },
      energy_wh: { first: 123456.7, last: 123525.6 },
      ct_turns: 2,
      alarm_reads: 0,
      flags: { partial: false, energy_reset: false, meter_reconfigured: true },
      quarantined: false,
      quarantine_reason: null,
      received_at: '2026-06-01T12:00:05.123Z',
    },
  ]);
});

it('writes nulls, a quarantined record and a record without a start as the reference does', () => {
  const records = [
    recordArray({ start_ms: null, time_quality: 'unknown', v_min: null, p_avg: null, ct_turns: null, e_first_raw: null }),
    recordArray({ quarantined: 1, quarantine_reason: 'malformed_fields', duration_s: null, reads_n: null, reads_err: null }),
    recordArray({ e_first_raw: null, e_last_raw: null, partial: 1, energy_reset: 1 }),
  ];
  const text = pageText(records);
  expect(written(text)).toBe(referencePage(text, 1000));
  const [noStart, quarantined] = JSON.parse(written(text)) as Array<Record<string, unknown>>;
  expect(noStart).toMatchObject({ start_at: null, voltage_v: null, power_w: null, ct_turns: null, energy_wh: { first: null, last: 247051.2 } });
  expect(quarantined).toMatchObject({ quarantined: true, quarantine_reason: 'malformed_fields', energy_wh: null, reads: { n: null, err: null } });
});

it('writes anew what Postgres writes in another notation: exponents and negative zero', () => {
  const odd = [1e15, 1.5e-5, -0, 2.5e-7, 1e21, -3.25e17, 1e-300, 1.7976931348623157e308, 123456789012345680000];
  const records = odd.map((x, k) => recordArray({ v_avg: x, v_min: -x, p_max: x / 3, f_avg: x, arrival_seq: k, e_last_raw: x }));
  const text = pageText(records, postgresNumber);
  expect(text).toContain('1e+15');
  expect(text).toContain('-0,');
  expect(written(text)).toBe(referencePage(text, 1000));
});

it('writes counter readings of one CT turn as the reference does, on both sides of the range copied as it came', () => {
  // Copied as they came: plain decimals of up to nine integer digits and six decimals.
  const plain = [0, 1303.9, -42.5, 0.0001, 123456.789012, 999999999.999999, -999999999.000001];
  // Worked out anew: too many decimals or digits to be their own rounding, an exponent, a negative zero.
  const anew = [12.3456785, 0.1234567, 1303.8999999999999, 4359865271.595285, 1e9 + 0.5, 1e-6, -4e-7, -0, 1e15, 5e-324];
  const records = [...plain, ...anew].flatMap((x, k) => [
    recordArray({ arrival_seq: 2 * k, ct_turns: 1, e_first_raw: x, e_last_raw: -x }),
    recordArray({ arrival_seq: 2 * k + 1, ct_turns: null, e_first_raw: x, e_last_raw: x }),
  ]);
  const text = pageText(records, postgresNumber);
  expect(written(text)).toBe(referencePage(text, 1000));
  const firsts = (JSON.parse(written(text)) as Array<{ energy_wh: { first: number } }>).map((r) => r.energy_wh.first);
  expect(firsts.slice(0, 2 * plain.length)).toEqual(plain.flatMap((x) => [x, x]));
  expect(firsts[2 * plain.length]).toBe(12.345679);
});

it('matches the reference for counter readings of one CT turn over randomized decimals (seeded)', () => {
  const seed = 20261130;
  const random = seededRandom(seed);
  // Up to ten integer digits and eight decimals, so both sides of the copied range are drawn.
  const decimal = (): number => Number(((random() - 0.2) * 10 ** Math.floor(random() * 11)).toFixed(Math.floor(random() * 9)));
  const records = Array.from({ length: 5000 }, (_, k) => recordArray({ arrival_seq: k, ct_turns: 1, e_first_raw: decimal(), e_last_raw: decimal() }));
  const text = pageText(records, postgresNumber);
  expect({ seed, page: written(text, 5000) }).toEqual({ seed, page: referencePage(text, 5000) });
});

it('copies strings as Postgres escaped them, byte for byte the same as JSON.stringify', () => {
  const text = pageText([recordArray({ sid: 'a"b\\c\u0001\n', time_quality: 'zeit-é-✓', quarantine_reason: '\u2028 tab\t' })]);
  expect(written(text)).toBe(referencePage(text, 1000));
});

it('takes at most `limit` records, tells whether more followed and keys the last one written', () => {
  const records = [0, 1, 2].map((k) => recordArray({ arrival_seq: 100 + k, seq: k, sid: `0000000${k}`, start_ms: k === 2 ? null : 1_700_000_000_000 + k }));
  const text = pageText(records);
  expect(write(text, 2)).toMatchObject({ count: 2, hasMore: true, last: { arrival: 101, sid: '00000001', seq: 1, startMs: 1_700_000_000_001 } });
  expect(written(text, 2)).toBe(referencePage(text, 2));
  expect(write(text, 3)).toMatchObject({ count: 3, hasMore: false, last: { arrival: 102, seq: 2, startMs: null } });
  expect(write(text, 10)).toMatchObject({ count: 3, hasMore: false });
  expect(write('[]', 10)).toMatchObject({ count: 0, hasMore: false, last: null });
  expect(written('[]', 10)).toBe('[]');
});

it('writes the body around the page: members before, then after, given what the page held', () => {
  const text = pageText([recordArray({ arrival_seq: 5 }), recordArray({ arrival_seq: 6, seq: 43 })]);
  const after = jest.fn((page: { hasMore: boolean; last: { arrival: number } | null }) => ({ has_more: page.hasMore, next: page.last?.arrival ?? null, note: 'ü' }));
  const page = writeRecordPage(text, 1, { before: { device_id: 'm-ä', window: { start: 'a' } }, after });
  expect(after).toHaveBeenCalledWith({ count: 1, hasMore: true, last: expect.objectContaining({ arrival: 5 }) });
  expect(page.body.toString('utf8')).toBe(`{"device_id":"m-ä","window":{"start":"a"},"records":${referencePage(text, 1)},"has_more":true,"next":5,"note":"ü"}`);
});

it('grows its buffers for a page larger than any before, and writes a small one after it', () => {
  // Records of the shortest text (zeros, empty strings) write about seven times their length.
  const tiny = RECORD_FIELDS.map((f) => (f === 'sid' || f === 'time_quality' ? '' : f === 'quarantine_reason' ? null : 0));
  const text = pageText(Array.from({ length: 12_000 }, () => tiny));
  const page = written(text, 12_000);
  expect(page.length).toBeGreaterThan(Math.max(4 * text.length, 4 << 20));
  expect(page).toBe(referencePage(text, 12_000));
  const records = [0, 1].map((k) => recordArray({ arrival_seq: k, seq: k }));
  const small = pageText(records);
  expect(written(small)).toBe(referencePage(small, 1000));
  // An earlier, longer page's bytes left in the buffers are never read as this page's.
  expect(() => write(small.slice(0, -40), 10)).toThrow(/not RECORD_JSON/);
});

it('refuses text that is not RECORD_JSON arrays rather than write a wrong answer', () => {
  const one = pageText([recordArray()]);
  expect(() => write('{}', 10)).toThrow(/not RECORD_JSON/);
  expect(() => write('', 10)).toThrow(/not RECORD_JSON/);
  expect(() => write(one.replace('[7,', '[7,1,'), 10)).toThrow(/not RECORD_JSON/); // a field too many
  expect(() => write(one.replace(',null,', ','), 10)).toThrow(/not RECORD_JSON/); // a field too few
  expect(() => write(one.slice(0, -5), 10)).toThrow(/not RECORD_JSON/); // cut short
  expect(() => write(`${one}x`, 10)).toThrow(/not RECORD_JSON/);
});

it('matches the reference over randomized records (seeded)', () => {
  const seed = 20261129;
  const random = seededRandom(seed);
  const pick = <T>(xs: T[]): T => xs[Math.floor(random() * xs.length)] as T;
  const float = (): number | null =>
    pick<() => number | null>([
      () => null,
      () => Math.round(random() * 1e4) / 100,
      () => (random() - 0.5) * 1e6,
      () => random() * 10 ** Math.floor(random() * 40 - 20),
      () => pick([0, -0, 1e15, 1e-5, 1e21, 5e-324]),
    ])();
  const records = Array.from({ length: 400 }, (_, k) => {
    const changes: Record<string, FieldValue> = { arrival_seq: k, seq: Math.floor(random() * 2 ** 40), start_ms: random() < 0.1 ? null : Math.floor((random() - 0.3) * 4e12) };
    for (const f of RECORD_FIELDS) if (/_(avg|min|max)$|_raw$/.test(f)) changes[f] = float();
    for (const f of ['partial', 'energy_reset', 'meter_reconfigured', 'quarantined'] as const) changes[f] = random() < 0.3 ? 1 : 0;
    changes.ct_turns = pick([null, 1, 2, 3, 7]);
    changes.quarantine_reason = changes.quarantined ? pick(['malformed_fields', 'invalid_identity']) : null;
    return recordArray(changes);
  });
  const text = pageText(records, postgresNumber);
  expect({ seed, page: written(text, 399) }).toEqual({ seed, page: referencePage(text, 399) });
});
