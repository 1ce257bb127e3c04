import { isoWriter } from './iso-time';

/**
 * The Meter interval record as partners see it (spec: Meter interval record). Pure.
 *
 * A page of up to 1000 records is read as one JSON text: Postgres writes each record as an
 * array of its fields (RECORD_JSON) and the page as an array of those, which one JSON.parse
 * turns into numbers and strings; the views are built straight from the arrays. Typed columns
 * cost a parsed value per field and an object per row before the view is even made.
 */

/** Fields of a record array, in order. */
export const RECORD_FIELDS = [
  'arrival_seq',
  'sid',
  'seq',
  /** Start and receive time as epoch milliseconds. */
  'start_ms',
  'time_quality',
  'duration_s',
  'reads_n',
  'reads_err',
  'v_avg',
  'v_min',
  'v_max',
  'i_avg',
  'i_min',
  'i_max',
  'p_avg',
  'p_min',
  'p_max',
  'f_avg',
  'f_min',
  'f_max',
  'pf_avg',
  'pf_min',
  'pf_max',
  'e_first_raw',
  'e_last_raw',
  'ct_turns',
  'alarm_reads',
  /** Flags and quarantined as 1 or 0. */
  'partial',
  'energy_reset',
  'meter_reconfigured',
  'quarantined',
  'quarantine_reason',
  'received_ms',
] as const;
type Field = (typeof RECORD_FIELDS)[number];
const at = Object.fromEntries(RECORD_FIELDS.map((f, k) => [f, k])) as Record<Field, number>;

/** A record as its array of RECORD_FIELDS. */
export type RecordFields = Array<string | number | null>;

const TEXT_FIELDS = new Set<Field>(['sid', 'time_quality', 'quarantine_reason']);
// date_part's float epoch (cheaper than extract's numeric) holds the microseconds of any
// timestamp to well under a millisecond, and rounding to bigint restores the exact milliseconds.
const SQL_OF: Partial<Record<Field, string>> = {
  start_ms: "(date_part('epoch', start_at) * 1000)::bigint",
  received_ms: "(date_part('epoch', received_at) * 1000)::bigint",
  partial: 'partial::int',
  energy_reset: 'energy_reset::int',
  meter_reconfigured: 'meter_reconfigured::int',
  quarantined: 'quarantined::int',
};
const jsonOf = (f: Field): string => (TEXT_FIELDS.has(f) ? `to_json(${f})::text` : `(${SQL_OF[f] ?? f})::text`);

/**
 * SQL: a row of interval_records as its JSON array of RECORD_FIELDS. Floats are written in
 * their shortest exact text (they are finite: every stored value came from JSON).
 */
export const RECORD_JSON = `concat('[', concat_ws(',', ${RECORD_FIELDS.map((f) => `COALESCE(${jsonOf(f)}, 'null')`).join(', ')}), ']')`;

/**
 * SQL: the records partners are shown. The spec's record has an integer `seq` and a `sid` of 8
 * hex characters, with no null for either (unlike the fields it marks "or null"), and arrival
 * pages are de-duplicated by them. A payload that carried no usable identity (quarantined
 * `malformed_payload` or `invalid_identity`) is kept under a key of its bytes, `sid` '#<hash>'
 * (domain/record.ts), for staff and so its repeats are stored once, but it is no interval
 * record: no listing shows it and no `meter.records_stored` counts it. (It has no start either,
 * so no summary or energy answer ever held it.)
 */
export const LISTED_RECORD = "sid NOT LIKE '#%'";

/** The key a page ends on: for cursors by start time and arrival bookmarks. */
export interface RecordKey {
  arrival: number;
  sid: string;
  seq: number;
  startMs: number | null;
}

const round6 = (x: number): number => Math.round(x * 1e6) / 1e6;

function stat(f: RecordFields, avg: number): { avg: number; min: number; max: number } | null {
  const a = f[avg];
  const lo = f[avg + 1];
  const hi = f[avg + 2];
  return a === null || lo === null || hi === null ? null : { avg: a as number, min: lo as number, max: hi as number };
}

/** Writers of start and receive times: each remembers its last day, and a page's starts share few days, as do its receipts. */
interface TimeWriters {
  start: (ms: number) => string;
  received: (ms: number) => string;
}

/** The views of a page's records. */
export function pageViews(records: RecordFields[]): Array<Record<string, unknown>> {
  const iso: TimeWriters = { start: isoWriter(), received: isoWriter() };
  return records.map((f) => recordView(f, iso));
}

/** A listed record (LISTED_RECORD): its `sid` and `seq` are the ones it carried. */
function recordView(f: RecordFields, iso: TimeWriters): Record<string, unknown> {
  const quarantined = f[at.quarantined] === 1;
  const ctTurns = f[at.ct_turns] as number | null;
  const ct = ctTurns ?? 1;
  const first = f[at.e_first_raw] as number | null;
  const last = f[at.e_last_raw] as number | null;
  const start = f[at.start_ms] as number | null;
  return {
    seq: f[at.seq],
    sid: f[at.sid],
    start_at: start === null ? null : iso.start(start),
    time_quality: f[at.time_quality],
    duration_s: f[at.duration_s],
    reads: { n: f[at.reads_n], err: f[at.reads_err] },
    voltage_v: stat(f, at.v_avg),
    current_a: stat(f, at.i_avg),
    power_w: stat(f, at.p_avg),
    frequency_hz: stat(f, at.f_avg),
    power_factor: stat(f, at.pf_avg),
    energy_wh:
      !quarantined && (first !== null || last !== null)
        ? { first: first === null ? null : round6(first / ct), last: last === null ? null : round6(last / ct) }
        : null,
    ct_turns: ctTurns,
    alarm_reads: f[at.alarm_reads],
    flags: { partial: f[at.partial] === 1, energy_reset: f[at.energy_reset] === 1, meter_reconfigured: f[at.meter_reconfigured] === 1 },
    quarantined,
    quarantine_reason: f[at.quarantine_reason],
    received_at: iso.received(f[at.received_ms] as number),
  };
}

/** The key of a record. */
export function recordKey(f: RecordFields): RecordKey {
  return { arrival: f[at.arrival_seq] as number, sid: f[at.sid] as string, seq: f[at.seq] as number, startMs: f[at.start_ms] as number | null };
}
