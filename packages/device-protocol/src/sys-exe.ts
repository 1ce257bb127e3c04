/** System command lines (`<r>/sys/exe`) and their acknowledgements (`<r>/sys/resp`), device protocol v1: what the platform sends and the device reads, and back. */

export type AckResult = 'ok' | 'failed' | 'applied' | 'unknown' | 'duplicate';

export interface SysCommand {
  /** The line exactly as received (UTF-8). */
  line: string;
  /** Text before the first `>`; the whole line when there is none. */
  verb: string;
  /** Text after the first `>` (may be empty). */
  rawArgs: string;
  /** `k=v` pairs joined by `;`, in order; a part without `=` has value undefined. */
  args: Array<[string, string | undefined]>;
}

export function parseSysCommand(line: string): SysCommand {
  const gt = line.indexOf('>');
  const verb = gt < 0 ? line : line.slice(0, gt);
  const rawArgs = gt < 0 ? '' : line.slice(gt + 1);
  const args: Array<[string, string | undefined]> = [];
  if (rawArgs !== '') {
    for (const part of rawArgs.split(';')) {
      const eq = part.indexOf('=');
      args.push(eq < 0 ? [part, undefined] : [part.slice(0, eq), part.slice(eq + 1)]);
    }
  }
  return { line, verb, rawArgs, args };
}

/** The acknowledgement of a line: the line without a trailing `>`, then `>`, then the result (`failed:<reason>` allowed). */
export function ackLine(line: string, result: AckResult, reason?: string): string {
  const base = line.endsWith('>') ? line.slice(0, -1) : line;
  return `${base}>${result}${reason !== undefined && result === 'failed' ? `:${reason}` : ''}`;
}

/** Named argument lookup (the first pair with that key). */
export function arg(cmd: SysCommand, key: string): string | undefined {
  return cmd.args.find(([k]) => k === key)?.[1];
}

/** A token a meter can read: 1–64 characters from letters, digits and `_-.:`. */
export function readableToken(token: string | undefined): token is string {
  return token !== undefined && /^[A-Za-z0-9_.:-]{1,64}$/.test(token);
}

/** Verbs every device knows; meters add report, sample and resetenergy. */
export const COMMON_VERBS = ['query', 'reboot', 'set', 'addfile', 'setcert', 'rmfile', 'ota_update', 'clearsettings', 'formatfs', 'factory_reset'] as const;
export const METER_VERBS = ['report', 'sample', 'resetenergy'] as const;
export type Verb = (typeof COMMON_VERBS)[number] | (typeof METER_VERBS)[number];

/** A line the platform sends: `<verb>>` and the `k=v` pairs joined by `;` (`query>`, `sample>token=t1`). */
export function formatSysLine(verb: Verb, args: ReadonlyArray<[string, string]> = []): string {
  return `${verb}>${args.map(([k, v]) => `${k}=${v}`).join(';')}`;
}

export interface Acknowledgement {
  /** The acknowledged line's verb. */
  verb: string;
  /** The acknowledged line's arguments as sent. */
  rawArgs: string;
  result: AckResult;
  /** After `failed:`, if given. */
  reason: string | null;
}

/**
 * Reads a `sys/resp` acknowledgement: the line without its trailing `>`, then `>`, then the
 * result (`failed` may carry `:<reason>`), optionally ended by a line terminator. Log lines
 * (`log>...`) and anything else give null.
 */
export function parseAcknowledgement(line: string): Acknowledgement | null {
  if (line.startsWith('log>')) return null;
  // Firmware that writes its line with println ends it in CR LF or LF: the terminator is no part of it.
  const m = /^([a-z_]+)>(?:(.*)>)?(ok|failed|applied|unknown|duplicate)(?::(.*))?$/s.exec(line.replace(/[\r\n]+$/, ''));
  if (!m) return null;
  const [, verb, rawArgs, result, reason] = m as unknown as [string, string, string | undefined, AckResult, string | undefined];
  return { verb, rawArgs: rawArgs ?? '', result, reason: result === 'failed' ? (reason ?? null) : null };
}
