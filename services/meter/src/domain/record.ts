import { createHash } from 'node:crypto';

/**
 * Interval records (`<root>/<device_id>/iv`): validation, quarantine, time quality and CT
 * correction. Pure: the caller supplies the device id, the payload bytes and when the bridge
 * took the message off the network.
 */

/** Stable quarantine reasons, checked in this order (the first that applies is reported). */
export const QUARANTINE_REASONS = [
  'malformed_payload',
  'invalid_identity',
  'malformed_fields',
  'unusable_ct_turns',
  'invalid_clock',
  'impossible_values',
  'reads_exceed_duration',
  'start_in_future',
] as const;
export type QuarantineReason = (typeof QUARANTINE_REASONS)[number];

export type TimeQuality = 'device' | 'derived' | 'unknown';

/** avg, min, max. */
export interface Stat {
  avg: number;
  min: number;
  max: number;
}

/** A record as the service stores it, before the flags that depend on the previous record. */
export interface ParsedRecord {
  deviceId: string;
  /** The record's sid, or '#<hash>' when it carried none usable. */
  sid: string;
  /** The record's seq, or -1 when it carried none usable. */
  seq: number;
  startAt: Date | null;
  timeQuality: TimeQuality;
  durationS: number | null;
  readsN: number | null;
  readsErr: number | null;
  v: Stat | null;
  i: Stat | null;
  p: Stat | null;
  f: Stat | null;
  pf: Stat | null;
  eFirstRaw: number | null;
  eLastRaw: number | null;
  ctTurns: number | null;
  alarmReads: number | null;
  partial: boolean;
  quarantined: boolean;
  quarantineReason: QuarantineReason | null;
  receivedAt: Date;
}

/** How far a synced start may lie ahead of the receive time (meter clock skew) before it is refused. */
export const FUTURE_TOLERANCE_S = 300;

export const round6 = (x: number): number => {
  const r = Math.round(x * 1e6) / 1e6;
  return Object.is(r, -0) ? 0 : r;
};

/** Largest start a record may name (9999-12-31T23:59:59Z), and the largest whole-number field. */
const MAX_EPOCH_S = 253_402_300_799;
const MAX_INT32 = 2_147_483_647;
const SID = /^[0-9a-f]{8}$/;
const isObject = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === 'object' && !Array.isArray(x);
const isNum = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
const isInt = (x: unknown): x is number => Number.isSafeInteger(x);
/** A whole number that fits the store's integer columns. */
const isSmallInt = (x: unknown): x is number => Number.isInteger(x) && Math.abs(x as number) <= MAX_INT32;

class Refused extends Error {
  constructor(readonly reason: QuarantineReason) {
    super(reason);
  }
}

function triple(x: unknown): [number, number, number] | null {
  if (x === null || x === undefined) return null;
  if (!Array.isArray(x) || x.length !== 3 || !x.every(isNum)) throw new Refused('malformed_fields');
  return [x[0] as number, x[1] as number, x[2] as number];
}

function optInt(x: unknown): number | null {
  if (x === null || x === undefined) return null;
  if (!isInt(x)) throw new Refused('malformed_fields');
  if (!isSmallInt(x)) throw new Refused('impossible_values');
  return x;
}

function statOf(t: [number, number, number] | null, divisor = 1): Stat | null {
  if (!t) return null;
  return { avg: round6(t[0] / divisor), min: round6(t[1] / divisor), max: round6(t[2] / divisor) };
}

/** min <= avg <= max within rounding, and every part inside [lo, hi]. */
function plausible(t: [number, number, number] | null, lo: number, hi: number): boolean {
  if (!t) return true;
  const [avg, min, max] = t;
  const eps = 1e-6 * Math.max(1, Math.abs(max));
  if (min > avg + eps || avg > max + eps) return false;
  return t.every((x) => x >= lo && x <= hi);
}

const unknownKey = (payload: Uint8Array): string => `#${createHash('sha256').update(payload).digest('hex').slice(0, 16)}`;

/** Parses one interval record payload; never throws. */
export function parseRecord(deviceId: string, payload: Uint8Array, receivedAt: Date): ParsedRecord {
  const base: ParsedRecord = {
    deviceId,
    sid: '',
    seq: -1,
    startAt: null,
    timeQuality: 'unknown',
    durationS: null,
    readsN: null,
    readsErr: null,
    v: null,
    i: null,
    p: null,
    f: null,
    pf: null,
    eFirstRaw: null,
    eLastRaw: null,
    ctTurns: null,
    alarmReads: null,
    partial: false,
    quarantined: true,
    quarantineReason: null,
    receivedAt,
  };
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch {
    doc = undefined;
  }
  if (!isObject(doc)) return { ...base, sid: unknownKey(payload), quarantineReason: 'malformed_payload' };
  if (typeof doc.sid !== 'string' || !SID.test(doc.sid) || !isInt(doc.seq) || doc.seq < 0 || doc.seq > Number.MAX_SAFE_INTEGER) {
    return { ...base, sid: unknownKey(payload), quarantineReason: 'invalid_identity', ...salvage(doc) };
  }
  const rec: ParsedRecord = { ...base, sid: doc.sid, seq: doc.seq, ...salvage(doc) };
  const when = timeOf(doc, receivedAt);
  if (when) {
    rec.startAt = when.startAt;
    rec.timeQuality = when.quality;
  }
  try {
    return { ...rec, ...check(doc, receivedAt, when), quarantined: false, quarantineReason: null };
  } catch (err) {
    if (err instanceof Refused) return { ...rec, quarantineReason: err.reason };
    throw err;
  }
}

/** What a quarantined record still shows: fields that are well-formed on their own. */
function salvage(doc: Record<string, unknown>): Partial<ParsedRecord> {
  const out: Partial<ParsedRecord> = {};
  if (isSmallInt(doc.dur)) out.durationS = doc.dur;
  if (isSmallInt(doc.n)) out.readsN = doc.n;
  if (isSmallInt(doc.err)) out.readsErr = doc.err;
  if (doc.ct === undefined) out.ctTurns = 1;
  else if (isSmallInt(doc.ct) && doc.ct >= 1) out.ctTurns = doc.ct;
  if (isSmallInt(doc.alarms)) out.alarmReads = doc.alarms;
  if (typeof doc.partial === 'boolean') out.partial = doc.partial;
  return out;
}

/** The interval start and its quality from the clock fields, or undefined when they are unusable. */
function timeOf(doc: Record<string, unknown>, receivedAt: Date): { startAt: Date | null; quality: TimeQuality } | undefined {
  switch (doc.clock) {
    case 'synced':
      return isNum(doc.start) && doc.start >= 0 && doc.start <= MAX_EPOCH_S ? { startAt: new Date(Math.round(doc.start * 1000)), quality: 'device' } : undefined;
    case 'free':
      if (!isNum(doc.up) || !isNum(doc.up_now) || doc.up < 0 || doc.up_now < doc.up || doc.up_now - doc.up > MAX_EPOCH_S) return undefined;
      return { startAt: new Date(receivedAt.getTime() - Math.round((doc.up_now - doc.up) * 1000)), quality: 'derived' };
    case 'none':
      return { startAt: null, quality: 'unknown' };
    default:
      return undefined;
  }
}

function check(doc: Record<string, unknown>, receivedAt: Date, when: ReturnType<typeof timeOf>): Partial<ParsedRecord> {
  // Shapes first: every field the protocol defines has its type.
  if (doc.start !== undefined && doc.start !== null && !isNum(doc.start)) throw new Refused('malformed_fields');
  const dur = optInt(doc.dur);
  const n = optInt(doc.n);
  const err = optInt(doc.err);
  const alarms = optInt(doc.alarms);
  const v = triple(doc.v);
  const i = triple(doc.i);
  const p = triple(doc.p);
  const f = triple(doc.f);
  const pf = triple(doc.pf);
  let e: [number, number] | null = null;
  if (doc.e !== null && doc.e !== undefined) {
    if (!Array.isArray(doc.e) || doc.e.length !== 2 || !doc.e.every(isNum)) throw new Refused('malformed_fields');
    e = [doc.e[0] as number, doc.e[1] as number];
  }
  if (doc.partial !== undefined && typeof doc.partial !== 'boolean') throw new Refused('malformed_fields');
  if (doc.ct !== undefined && !isNum(doc.ct)) throw new Refused('malformed_fields');
  // CT turns divide current, power and energy: they must be a whole number of at least 1.
  const ct = doc.ct === undefined ? 1 : (doc.ct as number);
  if (!isSmallInt(ct) || ct < 1) throw new Refused('unusable_ct_turns');
  if (!when) throw new Refused('invalid_clock');
  // Values no meter can measure.
  const impossible =
    (dur !== null && dur < 0) ||
    (n !== null && n < 0) ||
    (err !== null && err < 0) ||
    (alarms !== null && (alarms < 0 || (n !== null && alarms > n))) ||
    !plausible(v, 0, 1000) ||
    !plausible(i, 0, 1e6) ||
    !plausible(p, -1e9, 1e9) ||
    !plausible(f, 1, 1000) ||
    !plausible(pf, 0, 1) ||
    (e !== null && (e[0] < 0 || e[1] < 0));
  if (impossible) throw new Refused('impossible_values');
  // One read per second: good and failed reads cannot outnumber the interval's seconds.
  if (dur !== null && (n ?? 0) + (err ?? 0) > dur + 1) throw new Refused('reads_exceed_duration');
  if (when.startAt && when.startAt.getTime() > receivedAt.getTime() + FUTURE_TOLERANCE_S * 1000) throw new Refused('start_in_future');
  const hasReads = n === null || n > 0;
  return {
    durationS: dur,
    readsN: n,
    readsErr: err,
    alarmReads: alarms,
    ctTurns: ct,
    partial: doc.partial === true,
    v: hasReads ? statOf(v) : null,
    i: hasReads ? statOf(i, ct) : null,
    p: hasReads ? statOf(p, ct) : null,
    f: hasReads ? statOf(f) : null,
    pf: hasReads ? statOf(pf) : null,
    eFirstRaw: hasReads && e ? e[0] : null,
    eLastRaw: hasReads && e ? e[1] : null,
  };
}

/** What flags need of the records before one in its stream (by seq). */
export interface Predecessor {
  /** The stream's last counter reading before the record, across records that carry none. */
  eLastRaw: number | null;
  /** The CT turns of the record just before. */
  ctTurns: number | null;
}

export interface DerivedFields {
  energyReset: boolean;
  meterReconfigured: boolean;
  /** Wh this record contributes to energy answers (CT corrected), or null without a counter reading. */
  energyUsedWh: number | null;
}

/**
 * Flags and energy from the record and its predecessor in the same stream. The counter is
 * compared raw (before CT correction), so a CT change never looks like a reset:
 * energy_reset when the counter went backwards inside the record or since the stream's last
 * reading before it (a record without a reading in between hides no reset);
 * meter_reconfigured when the CT turns differ from the previous record's.
 * Consumption of a record is last - first, or last alone when the counter restarted from zero
 * inside it; divided by its CT turns.
 */
export function deriveFields(rec: Pick<ParsedRecord, 'quarantined' | 'eFirstRaw' | 'eLastRaw' | 'ctTurns'>, prev: Predecessor | null): DerivedFields {
  if (rec.quarantined) return { energyReset: false, meterReconfigured: false, energyUsedWh: null };
  const ct = rec.ctTurns ?? 1;
  const meterReconfigured = prev !== null && prev.ctTurns !== null && rec.ctTurns !== null && prev.ctTurns !== rec.ctTurns;
  if (rec.eFirstRaw === null || rec.eLastRaw === null) return { energyReset: false, meterReconfigured, energyUsedWh: null };
  const within = rec.eLastRaw < rec.eFirstRaw;
  const since = prev !== null && prev.eLastRaw !== null && rec.eFirstRaw < prev.eLastRaw;
  const used = within ? rec.eLastRaw : rec.eLastRaw - rec.eFirstRaw;
  return { energyReset: within || since, meterReconfigured, energyUsedWh: round6(used / ct) };
}
