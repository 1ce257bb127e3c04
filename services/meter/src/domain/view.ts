/** The Meter interval record as partners see it (spec: Meter interval record). Pure. */

export interface RecordRow {
  arrival_seq: bigint | number;
  sid: string;
  seq: bigint | number;
  start_at: Date | null;
  time_quality: string;
  duration_s: number | null;
  reads_n: number | null;
  reads_err: number | null;
  v_avg: number | null;
  v_min: number | null;
  v_max: number | null;
  i_avg: number | null;
  i_min: number | null;
  i_max: number | null;
  p_avg: number | null;
  p_min: number | null;
  p_max: number | null;
  f_avg: number | null;
  f_min: number | null;
  f_max: number | null;
  pf_avg: number | null;
  pf_min: number | null;
  pf_max: number | null;
  e_first_raw: number | null;
  e_last_raw: number | null;
  ct_turns: number | null;
  alarm_reads: number | null;
  partial: boolean;
  energy_reset: boolean;
  meter_reconfigured: boolean;
  quarantined: boolean;
  quarantine_reason: string | null;
  received_at: Date;
}

/** Columns selected for RecordRow. */
export const RECORD_COLUMNS =
  'arrival_seq, sid, seq, start_at, time_quality, duration_s, reads_n, reads_err, v_avg, v_min, v_max, i_avg, i_min, i_max, ' +
  'p_avg, p_min, p_max, f_avg, f_min, f_max, pf_avg, pf_min, pf_max, e_first_raw, e_last_raw, ct_turns, alarm_reads, ' +
  'partial, energy_reset, meter_reconfigured, quarantined, quarantine_reason, received_at';

const round6 = (x: number): number => Math.round(x * 1e6) / 1e6;

function stat(avg: number | null, min: number | null, max: number | null): { avg: number; min: number; max: number } | null {
  return avg === null || min === null || max === null ? null : { avg, min, max };
}

export function recordView(r: RecordRow): Record<string, unknown> {
  const identified = !r.sid.startsWith('#');
  const ct = r.ct_turns ?? 1;
  const hasEnergy = !r.quarantined && (r.e_first_raw !== null || r.e_last_raw !== null);
  return {
    seq: identified ? Number(r.seq) : null,
    sid: identified ? r.sid : null,
    start_at: r.start_at ? r.start_at.toISOString() : null,
    time_quality: r.time_quality,
    duration_s: r.duration_s,
    reads: { n: r.reads_n, err: r.reads_err },
    voltage_v: stat(r.v_avg, r.v_min, r.v_max),
    current_a: stat(r.i_avg, r.i_min, r.i_max),
    power_w: stat(r.p_avg, r.p_min, r.p_max),
    frequency_hz: stat(r.f_avg, r.f_min, r.f_max),
    power_factor: stat(r.pf_avg, r.pf_min, r.pf_max),
    energy_wh: hasEnergy
      ? { first: r.e_first_raw === null ? null : round6(r.e_first_raw / ct), last: r.e_last_raw === null ? null : round6(r.e_last_raw / ct) }
      : null,
    ct_turns: r.ct_turns,
    alarm_reads: r.alarm_reads,
    flags: { partial: r.partial, energy_reset: r.energy_reset, meter_reconfigured: r.meter_reconfigured },
    quarantined: r.quarantined,
    quarantine_reason: r.quarantine_reason,
    received_at: r.received_at.toISOString(),
  };
}
