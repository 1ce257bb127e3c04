import type { PartnerEventType } from '@fleet/contracts';
import { parseAcknowledgement } from '@fleet/device-protocol';
import { ValidationError } from '@fleet/service-kit';

/** A `sys/resp` line as the feed keeps it. */
export interface FeedLine {
  kind: 'ack' | 'log' | 'other';
  line: string;
  command: string | null;
  result: string | null;
}

/**
 * Classifies a `sys/resp` line: an acknowledgement (`<line>>ok|failed[:reason]|applied|unknown|duplicate`),
 * a log line (`log>text`) or anything else the device sent (kept, so nothing is lost). NUL
 * characters, which Postgres text cannot hold, are dropped.
 */
export function readFeedLine(raw: string): FeedLine {
  const line = raw.split('\u0000').join('');
  if (line.startsWith('log>')) return { kind: 'log', line, command: null, result: null };
  const ack = parseAcknowledgement(line);
  if (ack) return { kind: 'ack', line, command: ack.verb, result: ack.result };
  return { kind: 'other', line, command: null, result: null };
}

/** A feed row as partners read it. */
export function feedRowView(row: { kind: string; line: string; receivedAt: Date }): Record<string, unknown> {
  const base = { kind: row.kind, line: row.line, received_at: row.receivedAt.toISOString() };
  if (row.kind === 'log') return { ...base, command: null, result: null, reason: null, text: row.line.slice('log>'.length) };
  const ack = row.kind === 'ack' ? parseAcknowledgement(row.line) : null;
  if (!ack) return { ...base, command: null, result: null, reason: null, text: null };
  // The acknowledged line is the payload that was published (`query>` for `query>ok`).
  return { ...base, command: `${ack.verb}>${ack.rawArgs}`, result: ack.result, reason: ack.reason, text: null };
}

/** The partner event a new feed row announces: acknowledgements and log lines; a line that is neither announces nothing. */
export function feedEventType(kind: string): PartnerEventType | null {
  if (kind === 'ack') return 'system.ack_received';
  if (kind === 'log') return 'system.log_received';
  return null;
}

/** Default page and the window read without a cursor or since. */
export const FEED_DEFAULT_LIMIT = 200;
export const FEED_DEFAULT_WINDOW_MS = 10 * 60_000;

/** A feed cursor: the id of the last row read (opaque, URL-safe). */
export const encodeFeedCursor = (id: bigint): string => Buffer.from(`r1:${id}`, 'utf8').toString('base64url');

export function decodeFeedCursor(cursor: string): bigint {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const m = /^r1:(0|[1-9][0-9]{0,18})$/.exec(text);
  if (!m) throw new ValidationError("invalid 'cursor': pass back a next_cursor of this feed");
  return BigInt(m[1] as string);
}
