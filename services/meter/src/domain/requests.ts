import { randomBytes } from 'node:crypto';
import { round6 } from './record';
import { formatSysLine, METER_VERBS, parseAcknowledgement, readableToken } from '@fleet/device-protocol';

/** Requests to the meter (report, sample, resetenergy): command lines, acknowledgements, live answers. Pure. */

/** At most one live reading per meter in this many seconds, whoever asks. */
export const SAMPLE_INTERVAL_S = 10;
/** A live reading still pending after this many seconds is final as no_reply (the spec allows 30). */
export const SAMPLE_TIMEOUT_S = 25;

export const SAMPLE_FAILURE_REASONS = ['busy', 'config_mode', 'unsupported', 'rejected', 'no_snapshot'] as const;
export const LINK_STATES = ['ok', 'timeout', 'crc', 'exception', 'badreply', 'notstarted', 'unknown'] as const;

/** A token the meter can read (letters, digits, `_-.:`, at most 64). */
export function newToken(prefix: 's' | 'r'): string {
  return `${prefix}_${randomBytes(10).toString('hex')}`;
}

/** A token a meter can read (device protocol: 1–64 of letters, digits and `_-.:`). */
export const isToken = (t: string): boolean => readableToken(t);

export { sysExeTopic } from '@fleet/device-protocol';
export const reportLine = (): string => formatSysLine('report');
export const sampleLine = (token: string): string => formatSysLine('sample', [['token', token]]);
export const resetLine = (token: string): string => formatSysLine('resetenergy', [['token', token]]);

export interface Ack {
  verb: string;
  /** The token named in the acknowledged line, if any. */
  token: string | null;
  result: string;
  reason: string | null;
}

/**
 * Parses a `sys/resp` line: `<line without trailing '>'>` + `>` + result, result `failed` may
 * carry `:<reason>`. Log lines (`log>...`) and anything else give null.
 */
export function parseAck(line: string): Ack | null {
  const ack = parseAcknowledgement(line);
  if (!ack || !(METER_VERBS as readonly string[]).includes(ack.verb)) return null;
  const tokenArg = ack.rawArgs.split(';').find((part) => part.startsWith('token='));
  return { verb: ack.verb, token: tokenArg ? tokenArg.slice('token='.length) : null, result: ack.result, reason: ack.reason };
}

export interface LiveReading {
  link: string;
  answered: boolean;
  voltage_v: number | null;
  current_a: number | null;
  power_w: number | null;
  power_factor: number | null;
  frequency_hz: number | null;
  ct_turns: number;
  age_s: number | null;
  taken_at: string;
  took_s: number;
}

export type LiveOutcome = { token: string; state: 'done'; reading: LiveReading } | { token: string; state: 'failed'; reason: string } | null;

const num = (x: unknown): number | null => (typeof x === 'number' && Number.isFinite(x) ? x : null);

/**
 * A `<r>/live` answer: a reading (current and power divided by CT turns) or an error.
 * Returns null when the payload names no token (nothing to match).
 */
export function parseLive(payload: Uint8Array, takenAt: Date, requestedAt: (token: string) => Date | undefined): LiveOutcome {
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch {
    return null;
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return null;
  const d = doc as Record<string, unknown>;
  if (typeof d.token !== 'string' || !isToken(d.token)) return null;
  if (d.error !== undefined) {
    const reason = typeof d.error === 'string' && (SAMPLE_FAILURE_REASONS as readonly string[]).includes(d.error) ? d.error : 'rejected';
    return { token: d.token, state: 'failed', reason };
  }
  const link = typeof d.link === 'string' && (LINK_STATES as readonly string[]).includes(d.link) ? d.link : 'unknown';
  const ct = Number.isInteger(d.ct) && (d.ct as number) >= 1 ? (d.ct as number) : 1;
  const corrected = (x: unknown): number | null => {
    const v = num(x);
    return v === null ? null : round6(v / ct);
  };
  const since = requestedAt(d.token);
  return {
    token: d.token,
    state: 'done',
    reading: {
      link,
      answered: link === 'ok',
      voltage_v: num(d.v),
      current_a: corrected(d.i),
      power_w: corrected(d.p),
      // Null, never zero, when nothing draws power.
      power_factor: num(d.pf) === 0 || num(d.p) === 0 ? null : num(d.pf),
      frequency_hz: num(d.f),
      ct_turns: ct,
      age_s: num(d.age_s),
      taken_at: takenAt.toISOString(),
      took_s: since ? Math.max(0, Math.round(takenAt.getTime() - since.getTime()) / 1000) : 0,
    },
  };
}
