import { createHash, randomBytes } from 'node:crypto';
import { formatSysLine } from '@fleet/device-protocol';

/** File transfer states (partner API, "File transfer states"). */
export type TransferState = 'queued' | 'sent' | 'succeeded' | 'failed' | 'timed_out';
export const TERMINAL_STATES: readonly TransferState[] = ['succeeded', 'failed', 'timed_out'];
export const isTerminal = (state: string): boolean => (TERMINAL_STATES as readonly string[]).includes(state);

export type CorrMode = 'envelope' | 'url_token';

export interface TransferRecord {
  id: string;
  deviceId: string;
  state: string;
  src: string;
  dest: string;
  sha256: string;
  corrMode: string;
  attempts: number;
  detail: string | null;
  createdAt: Date;
  sentAt: Date | null;
  ackDeadline: Date | null;
  settledAt: Date | null;
}

export const newTransferId = (): string => `xf_${randomBytes(10).toString('hex')}`;

export const TRANSFER_ID = /^xf_[0-9a-f]{20}$/;

/** What a push asked: the same Idempotency-Key with another request is refused. */
export const transferFingerprint = (deviceId: string, name: string, dest: string): string =>
  createHash('sha256').update(JSON.stringify([deviceId, name, dest])).digest('hex');

/**
 * The `addfile` line of a push. With corr_mode `envelope` it carries `xfer=<transfer id>` (the
 * acknowledgement repeats the line, so it names the transfer); with `url_token` the id travels in
 * the download URL only and the acknowledgement is matched by the whole line.
 */
export function addfileLine(dest: string, sha256: string, url: string, transferId: string, corrMode: CorrMode): string {
  const args: Array<[string, string]> = [['name', dest], ['sha256', sha256], ['url', url]];
  if (corrMode === 'envelope') args.push(['xfer', transferId]);
  return formatSysLine('addfile', args);
}

/** How a device's `addfile` acknowledgement settles a transfer. */
export function settlement(result: string, reason: string | null): { state: 'succeeded' | 'failed'; detail: string } {
  if (result === 'ok' || result === 'applied') return { state: 'succeeded', detail: `device acknowledged: ${result}` };
  if (result === 'unknown') return { state: 'failed', detail: 'the device does not know addfile (unknown)' };
  return { state: 'failed', detail: reason ? `device reported failure: ${reason}` : 'device reported failure' };
}

const SENT_NOTE =
  'The device downloads the file and checks its SHA-256 before it acknowledges. It may drop its broker session while downloading, so device_online false is normal now. ' +
  'Keep polling until terminal; after timed_out, read the system settings and look for the file in file_list.';

/** Seconds until the next useful poll: soon while queued, every few seconds while sent (never past the deadline), null once terminal. */
export function pollAfter(t: TransferRecord, now: Date): number | null {
  if (isTerminal(t.state)) return null;
  if (t.state === 'queued') return 1;
  const left = t.ackDeadline ? (t.ackDeadline.getTime() - now.getTime()) / 1000 : 5;
  return Math.max(1, Math.min(5, Math.ceil(left)));
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** The File transfer document partners poll. */
export function transferView(t: TransferRecord, now = new Date()): Record<string, unknown> {
  return {
    transfer_id: t.id,
    device_id: t.deviceId,
    state: t.state,
    terminal: isTerminal(t.state),
    src: t.src,
    dest: t.dest,
    sha256: t.sha256,
    corr_mode: t.corrMode,
    attempts: t.attempts,
    detail: t.detail,
    timeline: { created_at: iso(t.createdAt), sent_at: iso(t.sentAt), ack_deadline: iso(t.ackDeadline), settled_at: iso(t.settledAt) },
    ...(t.state === 'sent' ? { note: SENT_NOTE } : {}),
    poll_after_s: pollAfter(t, now),
  };
}
