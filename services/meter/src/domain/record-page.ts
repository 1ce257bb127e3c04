import { AnswerWriter, bodyHead, bodyTail, latin1, numberText } from './answer-writer';
import { isoByteWriter } from './iso-time';
import { round6 } from './record';
import { FIELD_AT, RECORD_FIELDS, type RecordKey } from './view';

/**
 * A page of records written as the partners' JSON straight from the text Postgres sends
 * (RECORD_JSON arrays), byte for byte, with no value parsed that the answer does not need. No
 * I/O; it reads the text from a buffer kept from page to page and writes with AnswerWriter.
 *
 * Postgres already wrote every number as its shortest exact text, the same digits JSON.stringify
 * writes, so a number is copied as it came; only what the two write differently (an exponent,
 * negative zero) goes through a JS number, and the counter readings, which are divided by the CT
 * turns and rounded to the µWh (unless that leaves them as they are). Parsing a 1000-record page
 * into arrays, building a view object per record and serializing them again cost the meter about
 * three times as much CPU and left some 50,000 short-lived objects per page to collect
 * (bench/README.md, meter).
 */

/** What a written page holds: how many records, whether more followed, the last record's key. */
export interface PageFacts {
  count: number;
  hasMore: boolean;
  last: RecordKey | null;
}

/**
 * The members of an answer's body before its `records` and, once the page is written, after them
 * (`after` runs while the page is being written: it must not write another).
 */
export interface BodyAround {
  before: Record<string, unknown>;
  after: (page: PageFacts) => Record<string, unknown>;
}

/** An answer's body as JSON text, with the facts of its page. */
export interface RecordPage extends PageFacts {
  body: Buffer;
}

const FIELDS = RECORD_FIELDS.length;
const QUOTE = 0x22;
const COMMA = 0x2c;
const OPEN = 0x5b;
const CLOSE = 0x5d;
const BACKSLASH = 0x5c;
const BRACE_CLOSE = 0x7d;

/** Bytes a record may add beyond its own text: keys, booleans, ISO times, numbers written anew. */
const RECORD_OVERHEAD = 2048;

/** The page's text as UTF-8, kept from page to page as AnswerWriter keeps its buffer (about 0.2 MB a page). */
let textScratch = Buffer.alloc(0);

const KEY = {
  seq: latin1('{"seq":'),
  sid: latin1(',"sid":'),
  startAt: latin1(',"start_at":'),
  timeQuality: latin1(',"time_quality":'),
  durationS: latin1(',"duration_s":'),
  readsN: latin1(',"reads":{"n":'),
  readsErr: latin1(',"err":'),
  voltage: latin1(',"voltage_v":'),
  current: latin1(',"current_a":'),
  power: latin1(',"power_w":'),
  frequency: latin1(',"frequency_hz":'),
  powerFactor: latin1(',"power_factor":'),
  avg: latin1('{"avg":'),
  min: latin1(',"min":'),
  max: latin1(',"max":'),
  energy: latin1(',"energy_wh":'),
  first: latin1('{"first":'),
  last: latin1(',"last":'),
  ctTurns: latin1(',"ct_turns":'),
  alarmReads: latin1(',"alarm_reads":'),
  partial: latin1(',"flags":{"partial":'),
  energyReset: latin1(',"energy_reset":'),
  reconfigured: latin1(',"meter_reconfigured":'),
  quarantined: latin1('},"quarantined":'),
  reason: latin1(',"quarantine_reason":'),
  receivedAt: latin1(',"received_at":"'),
  end: latin1('"}'),
  null: latin1('null'),
  true: latin1('true'),
  false: latin1('false'),
};

/** Writes a page; one instance per page. */
class PageWriter extends AnswerWriter {
  private readonly src: Buffer;
  /** Bytes of the page's text in `src`. */
  private readonly n: number;
  private readonly starts = new Int32Array(FIELDS);
  private readonly ends = new Int32Array(FIELDS);
  private readonly isoStart = isoByteWriter();
  private readonly isoReceived = isoByteWriter();

  constructor(text: string) {
    // An answer is about three times its text.
    super(text.length * 4);
    // UTF-8 takes at most 3 bytes for each UTF-16 unit.
    if (textScratch.length < text.length * 3) textScratch = Buffer.allocUnsafeSlow(Math.max(text.length * 3, 1 << 20));
    this.src = textScratch;
    this.n = this.src.write(text, 0, 'utf8');
  }

  write(limit: number, around: BodyAround): RecordPage {
    const { src, n } = this;
    let i = 1;
    let count = 0;
    this.utf8(bodyHead(around.before, 'records'));
    this.reserve(1);
    this.byte(OPEN);
    if (n < 2 || src[0] !== OPEN) throw malformed(0);
    while (i < n && src[i] === OPEN) {
      if (count === limit) break;
      const start = i;
      i = this.fields(i + 1);
      this.reserve(i - start + RECORD_OVERHEAD);
      if (count > 0) this.byte(COMMA);
      this.record();
      count += 1;
      if (src[i] === COMMA) i += 1;
    }
    const hasMore = i < n && src[i] === OPEN;
    if (!hasMore && (src[i] !== CLOSE || i !== n - 1)) throw malformed(i);
    this.reserve(1);
    this.byte(CLOSE);
    const facts: PageFacts = { count, hasMore, last: count > 0 ? this.key() : null };
    this.utf8(bodyTail(around.after(facts)));
    return { ...facts, body: this.finish() };
  }

  /** Finds the fields of the record whose first field starts at `i`; returns the index past its `]`. */
  private fields(i: number): number {
    const { src, starts, ends, n } = this;
    for (let f = 0; f < FIELDS; f += 1) {
      starts[f] = i;
      if (src[i] === QUOTE) {
        i += 1;
        while (i < n && src[i] !== QUOTE) i += src[i] === BACKSLASH ? 2 : 1;
        i += 1;
      } else {
        while (i < n && src[i] !== COMMA && src[i] !== CLOSE) i += 1;
      }
      ends[f] = i;
      // Past `n` the scratch buffer holds an earlier page's bytes: never read as this one's.
      if (i >= n || src[i] !== (f === FIELDS - 1 ? CLOSE : COMMA)) throw malformed(i);
      i += 1;
    }
    return i;
  }

  private record(): void {
    const K = KEY;
    this.copy(K.seq);
    this.token(FIELD_AT.seq);
    this.copy(K.sid);
    this.token(FIELD_AT.sid);
    this.copy(K.startAt);
    if (this.isNull(FIELD_AT.start_ms)) this.copy(K.null);
    else {
      this.byte(QUOTE);
      this.o = this.isoStart(this.integer(FIELD_AT.start_ms), this.out, this.o);
      this.byte(QUOTE);
    }
    this.copy(K.timeQuality);
    this.token(FIELD_AT.time_quality);
    this.copy(K.durationS);
    this.numberToken(FIELD_AT.duration_s);
    this.copy(K.readsN);
    this.numberToken(FIELD_AT.reads_n);
    this.copy(K.readsErr);
    this.numberToken(FIELD_AT.reads_err);
    this.byte(BRACE_CLOSE);
    this.stat(K.voltage, FIELD_AT.v_avg);
    this.stat(K.current, FIELD_AT.i_avg);
    this.stat(K.power, FIELD_AT.p_avg);
    this.stat(K.frequency, FIELD_AT.f_avg);
    this.stat(K.powerFactor, FIELD_AT.pf_avg);
    this.energy();
    this.copy(K.ctTurns);
    this.numberToken(FIELD_AT.ct_turns);
    this.copy(K.alarmReads);
    this.numberToken(FIELD_AT.alarm_reads);
    this.copy(K.partial);
    this.flag(FIELD_AT.partial);
    this.copy(K.energyReset);
    this.flag(FIELD_AT.energy_reset);
    this.copy(K.reconfigured);
    this.flag(FIELD_AT.meter_reconfigured);
    this.copy(K.quarantined);
    this.flag(FIELD_AT.quarantined);
    this.copy(K.reason);
    this.token(FIELD_AT.quarantine_reason);
    this.copy(K.receivedAt);
    this.o = this.isoReceived(this.integer(FIELD_AT.received_ms), this.out, this.o);
    this.copy(K.end);
  }

  /** `{avg, min, max}` from three fields in a row, or null when any is null. */
  private stat(key: Buffer, avg: number): void {
    this.copy(key);
    if (this.isNull(avg) || this.isNull(avg + 1) || this.isNull(avg + 2)) {
      this.copy(KEY.null);
      return;
    }
    this.copy(KEY.avg);
    this.numberToken(avg);
    this.copy(KEY.min);
    this.numberToken(avg + 1);
    this.copy(KEY.max);
    this.numberToken(avg + 2);
    this.byte(BRACE_CLOSE);
  }

  /** The counter readings in Wh (raw over CT turns, to the µWh); none for a quarantined record. */
  private energy(): void {
    this.copy(KEY.energy);
    const noFirst = this.isNull(FIELD_AT.e_first_raw);
    const noLast = this.isNull(FIELD_AT.e_last_raw);
    if (this.isOne(FIELD_AT.quarantined) || (noFirst && noLast)) {
      this.copy(KEY.null);
      return;
    }
    const ct = this.isNull(FIELD_AT.ct_turns) ? 1 : this.integer(FIELD_AT.ct_turns);
    this.copy(KEY.first);
    this.reading(FIELD_AT.e_first_raw, ct);
    this.copy(KEY.last);
    this.reading(FIELD_AT.e_last_raw, ct);
    this.byte(BRACE_CLOSE);
  }

  /**
   * One counter reading (or null): raw over CT turns, rounded to the µWh. With one turn, a reading
   * Postgres wrote as a plain decimal of at most nine integer digits and six decimals is its own
   * rounding (below 1e9 a µWh count stays exact in a double), and it is written as it came, as
   * numberToken writes a measured value; anything else is worked out anew.
   */
  private reading(f: number, ct: number): void {
    if (this.isNull(f)) this.copy(KEY.null);
    else if (ct === 1 && this.isPlainMicroDecimal(f)) this.token(f);
    else this.text(numberText(round6(this.number(f) / ct)));
  }

  /** True for text such as `-123.456789`: no exponent, at most 9 + 6 digits, never a negative zero. */
  private isPlainMicroDecimal(f: number): boolean {
    const { src } = this;
    const e = this.endOf(f);
    const s = this.startOf(f);
    const negative = src[s] === 0x2d;
    let whole = 0;
    let decimals = -1;
    let nonZero = false;
    for (let k = negative ? s + 1 : s; k < e; k += 1) {
      const c = src[k] as number;
      if (c === 0x2e && decimals < 0) decimals = 0;
      else if (c >= 0x30 && c <= 0x39) {
        if (decimals < 0) whole += 1;
        else decimals += 1;
        if (c !== 0x30) nonZero = true;
      } else return false;
    }
    return whole >= 1 && whole <= 9 && decimals !== 0 && decimals <= 6 && (nonZero || !negative);
  }

  private key(): RecordKey {
    const raw = (f: number): string => this.src.toString('utf8', this.startOf(f), this.endOf(f));
    return {
      arrival: this.number(FIELD_AT.arrival_seq),
      sid: JSON.parse(raw(FIELD_AT.sid)) as string,
      seq: this.number(FIELD_AT.seq),
      startMs: this.isNull(FIELD_AT.start_ms) ? null : this.number(FIELD_AT.start_ms),
    };
  }

  private startOf(f: number): number {
    return this.starts[f] as number;
  }

  private endOf(f: number): number {
    return this.ends[f] as number;
  }

  private isNull(f: number): boolean {
    const s = this.startOf(f);
    return this.endOf(f) - s === 4 && this.src[s] === 0x6e;
  }

  /** A flag or `quarantined`, written by Postgres as 1 or 0. */
  private isOne(f: number): boolean {
    const s = this.startOf(f);
    return this.endOf(f) - s === 1 && this.src[s] === 0x31;
  }

  private flag(f: number): void {
    this.copy(this.isOne(f) ? KEY.true : KEY.false);
  }

  /** An integer field (epoch milliseconds, CT turns) read without making a string of it. */
  private integer(f: number): number {
    const { src } = this;
    const e = this.endOf(f);
    let k = this.startOf(f);
    const negative = src[k] === 0x2d;
    if (negative) k += 1;
    let v = 0;
    for (; k < e; k += 1) v = v * 10 + ((src[k] as number) - 0x30);
    return negative ? -v : v;
  }

  private number(f: number): number {
    return Number(this.src.toString('latin1', this.startOf(f), this.endOf(f)));
  }

  /**
   * A number field (or null) as JSON.stringify writes it: the text as it came, unless it holds an
   * exponent (Postgres writes one from 1e15 and below 1e-4, JavaScript from 1e21 and below 1e-6)
   * or is negative zero; those are written anew from their value.
   */
  private numberToken(f: number): void {
    const { src } = this;
    const s = this.startOf(f);
    const e = this.endOf(f);
    for (let k = s; k < e; k += 1) {
      const c = src[k] as number;
      if (c === 0x65 || c === 0x45) {
        this.text(numberText(this.number(f)));
        return;
      }
    }
    if (e - s === 2 && src[s] === 0x2d && src[s + 1] === 0x30) this.byte(0x30);
    else this.token(f);
  }

  /** A field's text as it came: a JSON string Postgres wrote (to_json), an integer, null. */
  private token(f: number): void {
    const { src, out } = this;
    const e = this.endOf(f);
    let o = this.o;
    for (let k = this.startOf(f); k < e; k += 1) out[o++] = src[k] as number;
    this.o = o;
  }
}

function malformed(at: number): Error {
  return new Error(`record page text is not RECORD_JSON arrays (at byte ${at})`);
}

/**
 * An answer's body holding up to `limit` records of `text` (a JSON array of RECORD_JSON arrays,
 * as the store reads a page) as the partners' Meter interval records: `around.before`'s members,
 * `"records": [...]`, then the members `around.after` gives once the page's facts are known.
 */
export function writeRecordPage(text: string, limit: number, around: BodyAround): RecordPage {
  return new PageWriter(text).write(limit, around);
}
