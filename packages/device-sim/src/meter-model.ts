/** Pure meter physics and interval bookkeeping: reads once per simulated second. */

export type ClockMode = 'synced' | 'free' | 'none';
export type LinkState = 'ok' | 'timeout' | 'crc' | 'exception' | 'badreply' | 'notstarted' | 'unknown';

/** One good read, before CT correction (i, p raw = true value × ct turns). */
export interface Read {
  at: number;
  v: number;
  i: number;
  p: number;
  f: number;
  pf: number | null;
  /** Lifetime counter (Wh, raw) right after this read. */
  e: number;
}

export type Stat = [number, number, number];

export interface IntervalRecord {
  sid: string;
  seq: number;
  start: number | null;
  clock: ClockMode;
  dur: number | null;
  n: number;
  err: number;
  v: Stat | null;
  i: Stat | null;
  p: Stat | null;
  f: Stat | null;
  pf: Stat | null;
  e: [number, number] | null;
  ct: number;
  alarms: number;
  partial: boolean;
  up?: number;
  up_now?: number;
}

class StatAcc {
  n = 0;
  sum = 0;
  min = Infinity;
  max = -Infinity;
  add(x: number): void {
    this.n++;
    this.sum += x;
    if (x < this.min) this.min = x;
    if (x > this.max) this.max = x;
  }
  value(digits: number): Stat | null {
    return this.n === 0 ? null : [round(this.sum / this.n, digits), round(this.min, digits), round(this.max, digits)];
  }
}

/** Statistics of the interval in progress. */
export class IntervalAcc {
  n = 0;
  err = 0;
  alarms = 0;
  v = new StatAcc();
  i = new StatAcc();
  p = new StatAcc();
  f = new StatAcc();
  pf = new StatAcc();
  eFirst: number | undefined;
  eLast: number | undefined;

  addRead(r: Read): void {
    this.n++;
    this.v.add(r.v);
    this.i.add(r.i);
    this.p.add(r.p);
    this.f.add(r.f);
    if (r.pf !== null) this.pf.add(r.pf);
    if (r.v < 207 || r.v > 253) this.alarms++;
    this.eFirst ??= r.e;
    this.eLast = r.e;
  }

  addError(): void {
    this.err++;
  }
}

/** Builds the record of a closed interval (values rounded as a meter would send them). */
export function buildRecord(acc: IntervalAcc, fields: { sid: string; seq: number; start: number | null; clock: ClockMode; dur: number | null; ct: number; partial: boolean; up?: number }): IntervalRecord {
  const rec: IntervalRecord = {
    sid: fields.sid,
    seq: fields.seq,
    start: fields.start,
    clock: fields.clock,
    dur: fields.dur,
    n: acc.n,
    err: acc.err,
    v: acc.v.value(1),
    i: acc.i.value(3),
    p: acc.p.value(1),
    f: acc.f.value(2),
    pf: acc.pf.value(3),
    e: acc.eFirst === undefined || acc.eLast === undefined ? null : [round(acc.eFirst, 3), round(acc.eLast, 3)],
    ct: fields.ct,
    alarms: acc.alarms,
    partial: fields.partial,
  };
  if (fields.up !== undefined) rec.up = fields.up;
  return rec;
}

/** True power drawn (W) at a simulated time: a base load with a daily swing and noise. */
export type LoadProfile = (simMs: number) => number;

export function defaultLoad(baseW: number): LoadProfile {
  return (t) => {
    if (baseW <= 0) return 0;
    const hour = (t / 3_600_000) % 24;
    const daily = 1 + 0.3 * Math.sin(((hour - 8) / 24) * 2 * Math.PI);
    return Math.max(0, baseW * daily * (1 + (Math.random() - 0.5) * 0.1));
  };
}

/** One read at time t given the true load, CT turns and the counter before the read. */
export function makeRead(t: number, trueW: number, ct: number, counterWh: number): Read {
  const v = 230 + 2 * Math.sin(t / 600_000) + (Math.random() - 0.5) * 3;
  const f = 50 + (Math.random() - 0.5) * 0.1;
  const drawing = trueW > 0.5;
  const pf = drawing ? Math.min(1, 0.9 + Math.random() * 0.09) : null;
  const p = trueW * ct;
  const i = drawing ? p / (v * (pf ?? 1)) : 0;
  // The counter integrates raw power over the second since the previous read.
  const e = counterWh + p / 3600;
  return { at: t, v, i, p, f, pf, e };
}

export function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export const BAD_VALUE_KINDS = ['negative_voltage', 'pf_above_one', 'ct_zero', 'reads_exceed_dur', 'string_numbers', 'missing_sid', 'not_json'] as const;
export type BadValueKind = (typeof BAD_VALUE_KINDS)[number];

/** A corrupted copy of a record as a faulty meter might send it; `not_json` gives a broken payload. */
export function corrupt(rec: IntervalRecord, kind: BadValueKind): string {
  const bad: Record<string, unknown> = { ...rec };
  switch (kind) {
    case 'negative_voltage':
      bad.v = [-231.5, -240, -220];
      break;
    case 'pf_above_one':
      bad.pf = [1.7, 1.2, 2.5];
      break;
    case 'ct_zero':
      bad.ct = 0;
      break;
    case 'reads_exceed_dur':
      bad.n = (rec.dur ?? 0) + 100;
      break;
    case 'string_numbers':
      bad.v = rec.v?.map(String) ?? ['x', 'y', 'z'];
      bad.seq = String(rec.seq);
      break;
    case 'missing_sid':
      delete bad.sid;
      break;
    case 'not_json':
      return `${JSON.stringify(rec).slice(0, 40)}\u0000garbage`;
  }
  return JSON.stringify(bad);
}
