import type { JsMsg } from 'nats';
import { parseAcknowledgement, parseCaptureSubject } from '@fleet/device-protocol';
import { isolatingPoison, type Logger, type OutboxNudge } from '@fleet/service-kit';
import { readFeedLine } from '../domain/feed';
import { settlement } from '../domain/transfer';
import type { SystemDb } from '../store/prisma';
import { appendFeedRows, type NewFeedRow } from '../store/responses';
import { saveSettings } from '../store/settings';
import { settleTransfer } from '../store/transfers';

/** A `sys/*` message of a device, as captured into DEVICE_IN. */
export interface SysMessage {
  deviceId: string;
  /** Topic levels after `<root>/<device_id>/`, joined by '.' (`sys.resp`, `sys.settings`). */
  kind: string;
  text: string;
  receivedAt: Date;
  /** The capture's id (Nats-Msg-Id), or the stream sequence when it carries none. */
  msgId: string;
}

export function readSysMessage(msg: Pick<JsMsg, 'subject' | 'data' | 'headers' | 'seq'>, prefix: string, now = new Date()): SysMessage | null {
  const captured = parseCaptureSubject(msg.subject, prefix);
  if (!captured || captured.direction !== 'in') return null;
  const header = msg.headers?.get('Received-At');
  const at = header ? Date.parse(header) : Number.NaN;
  return {
    deviceId: captured.deviceId,
    kind: captured.tokens.join('.'),
    text: Buffer.from(msg.data).toString('utf8'),
    receivedAt: Number.isFinite(at) ? new Date(at) : now,
    msgId: msg.headers?.get('Nats-Msg-Id') || `seq:${msg.seq}`,
  };
}

/**
 * `sys/settings`: a JSON object, NUL characters dropped from its names and values (Postgres
 * cannot hold them); null for anything else. They are dropped after parsing, so a value that
 * merely contains the text `\\u0000` (a backslash, then `u0000`) stays as the device sent it.
 */
function settingsDoc(text: string): Record<string, unknown> | null {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return null;
  }
  return doc !== null && typeof doc === 'object' && !Array.isArray(doc) ? (withoutNul(doc) as Record<string, unknown>) : null;
}

function withoutNul(value: unknown): unknown {
  if (typeof value === 'string') return value.includes('\u0000') ? value.split('\u0000').join('') : value;
  if (Array.isArray(value)) return value.map(withoutNul);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [withoutNul(k) as string, withoutNul(v)]));
  }
  return value;
}

/**
 * Handles a batch of devices' `sys/*` traffic: acknowledgements and log lines go to the response
 * feed, and an `addfile` acknowledgement settles its transfer, in one transaction with their
 * partner events (system.ack_received, system.log_received, file_transfer.settled) in the
 * outbox; `sys/settings` replaces the cached settings. A batch that fails as a whole is retried message by message: one
 * that still fails while others succeed is poison (terminated, logged) and never blocks the rest;
 * when every one fails, or the database is out of reach, the batch is redelivered (isolatingPoison).
 */
export function sysTrafficProcessor(db: SystemDb, prefix: string, logger: Logger, relay?: OutboxNudge) {
  async function handle(messages: SysMessage[]): Promise<void> {
    const rows: NewFeedRow[] = [];
    for (const m of messages) {
      if (m.kind === 'sys.resp') rows.push({ deviceId: m.deviceId, receivedAt: m.receivedAt, msgId: m.msgId, ...readFeedLine(m.text) });
    }
    if (rows.length > 0) {
      const events = await db.$transaction(async (tx) => {
        let written = await appendFeedRows(tx, rows);
        for (const row of rows) {
          const ack = row.kind === 'ack' ? parseAcknowledgement(row.line) : null;
          if (!ack || ack.verb !== 'addfile') continue;
          const xfer = /(?:^|;)xfer=([^;]+)/.exec(ack.rawArgs)?.[1] ?? null;
          written += (await settleTransfer(tx, { deviceId: row.deviceId, transferId: xfer, line: `addfile>${ack.rawArgs}` }, { ...settlement(ack.result, ack.reason), at: row.receivedAt })).length;
        }
        return written;
      });
      if (events > 0) relay?.nudge();
    }
    for (const m of messages) {
      if (m.kind !== 'sys.settings') continue;
      const doc = settingsDoc(m.text);
      if (doc) await saveSettings(db, m.deviceId, doc, m.receivedAt);
      else logger.warn({ device_id: m.deviceId }, 'sys/settings that is not a JSON object; ignored');
    }
  }

  return isolatingPoison({ read: (msg, now) => readSysMessage(msg, prefix, now), store: handle, logger });
}
