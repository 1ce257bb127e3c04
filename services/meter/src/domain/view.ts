/**
 * The fields of a Meter interval record (spec: Meter interval record) as the store reads them
 * for a page, and which records are listed. Pure.
 *
 * A page of up to 1000 records is read as one JSON text: Postgres writes each record as an
 * array of its fields (RECORD_JSON) and the page as an array of those; domain/record-page.ts
 * writes the partners' JSON from that text. Typed columns cost a parsed value per field and an
 * object per row before anything is written.
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
/** The index of each field in a record's array. */
export const FIELD_AT = Object.fromEntries(RECORD_FIELDS.map((f, k) => [f, k])) as Record<Field, number>;

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
 * their shortest exact text (Postgres' default `extra_float_digits`; they are finite: every
 * stored value came from JSON), which record-page.ts copies into the answer.
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
