/**
 * The Meter interval record of the spec built the plain way, for tests: a page's text (RECORD_JSON
 * arrays) parsed into values, a view object per record, JSON.stringify. The page writer
 * (domain/record-page.ts) must write the same bytes.
 */
import { FIELD_AT as at } from '../src/domain/view';

export type FieldValue = string | number | null;

const round6 = (x: number): number => Math.round(x * 1e6) / 1e6;
const iso = (ms: number): string => new Date(ms).toISOString();

function stat(f: FieldValue[], avg: number): { avg: FieldValue; min: FieldValue; max: FieldValue } | null {
  const [a, lo, hi] = [f[avg] ?? null, f[avg + 1] ?? null, f[avg + 2] ?? null];
  return a === null || lo === null || hi === null ? null : { avg: a, min: lo, max: hi };
}

export function referenceView(f: FieldValue[]): Record<string, unknown> {
  const quarantined = f[at.quarantined] === 1;
  const ctTurns = f[at.ct_turns] as number | null;
  const ct = ctTurns ?? 1;
  const first = f[at.e_first_raw] as number | null;
  const last = f[at.e_last_raw] as number | null;
  const start = f[at.start_ms] as number | null;
  return {
    seq: f[at.seq],
    sid: f[at.sid],
    start_at: start === null ? null : iso(start),
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
    received_at: iso(f[at.received_ms] as number),
  };
}

/** The first `limit` records of a page's text, as JSON text. */
export function referencePage(text: string, limit: number): string {
  return JSON.stringify((JSON.parse(text) as FieldValue[][]).slice(0, limit).map(referenceView));
}
