import { parseCaptureSubject } from '@fleet/device-protocol';
import { counter, isolatingPoison, type Logger } from '@fleet/service-kit';
import { parseRecord, type ParsedRecord } from '../domain/record';
import { parseAck, parseLive } from '../domain/requests';
import { ingestRecords, type IngestResult } from '../store/ingest';
import type { MeterDb } from '../store/prisma';
import { noteUnmatchedRejection, sampleRequestedAt, settleReset, settleSample } from '../store/requests';

const recordsTaken = counter('fleet_meter_records_total', 'Interval records taken from DEVICE_IN, by outcome: stored, duplicate (already stored), cleared (from before a clear).', ['outcome']);
const recordsQuarantined = counter('fleet_meter_records_quarantined_total', 'Stored interval records that were quarantined, by reason.', ['reason']);

function countIngest(result: IngestResult): void {
  recordsTaken.inc({ outcome: 'stored' }, result.stored);
  recordsTaken.inc({ outcome: 'duplicate' }, result.duplicates);
  recordsTaken.inc({ outcome: 'cleared' }, result.cleared);
  for (const [reason, n] of Object.entries(result.quarantined ?? {})) recordsQuarantined.inc({ reason }, n);
}

export interface DeviceInMessage {
  deviceId: string;
  /** Topic levels after `<root>/<device_id>/`, joined by '.' (e.g. `iv`, `live`, `sys.resp`). */
  kind: string;
  payload: Uint8Array;
  receivedAt: Date;
}

/** Reads a DEVICE_IN message: `<prefix>dev.in.meter.<device_id>.<levels>`; null for anything else. */
export function readDeviceIn(subject: string, prefix: string, payload: Uint8Array, receivedAtHeader: string | undefined, now = new Date()): DeviceInMessage | null {
  const captured = parseCaptureSubject(subject, prefix);
  if (!captured || captured.direction !== 'in' || captured.product !== 'meter') return null;
  const at = receivedAtHeader ? Date.parse(receivedAtHeader) : Number.NaN;
  return { deviceId: captured.deviceId, kind: captured.tokens.join('.'), payload, receivedAt: Number.isFinite(at) ? new Date(at) : now };
}

/**
 * Handles a batch from DEVICE_IN: interval records are stored in one transaction; live
 * answers and acknowledgements settle sample and reset requests. When the batch fails as a
 * whole, every message is tried alone: one that still fails while others succeed is poison
 * and is returned (terminated, logged) so it never blocks the records behind it; when every
 * message fails the store is down and the batch is redelivered. Each of these transactions
 * writes the partner events of its change (records stored, requests settled); `onEvents` is
 * called once a batch committed some (the relay then publishes them without waiting to poll).
 */
export function deviceInProcessor(db: MeterDb, prefix: string, logger: Logger, onEvents?: () => void) {
  async function handle(messages: DeviceInMessage[]): Promise<void> {
    const records: ParsedRecord[] = [];
    const others: DeviceInMessage[] = [];
    for (const m of messages) {
      if (m.kind === 'iv') records.push(parseRecord(m.deviceId, m.payload, m.receivedAt));
      else if (m.kind === 'live' || m.kind === 'sys.resp') others.push(m);
    }
    let events = false;
    try {
      if (records.length > 0) {
        const result = await ingestRecords(db, records);
        countIngest(result);
        logger.debug({ ...result, batch: records.length }, 'interval records ingested');
        events = result.stored > 0;
      }
      for (const m of others) {
        const settled = m.kind === 'live' ? await onLive(m) : await onAck(m);
        events ||= settled;
      }
    } finally {
      if (events) onEvents?.();
    }
  }

  /** True when it settled a request (its event is committed). */
  async function onLive(m: DeviceInMessage): Promise<boolean> {
    let requestedAt: Date | undefined;
    const token = tokenOf(m.payload);
    if (token) requestedAt = await sampleRequestedAt(db, m.deviceId, token);
    const outcome = parseLive(m.payload, m.receivedAt, () => requestedAt);
    if (!outcome) return false;
    return settleSample(db, m.deviceId, outcome.token, outcome.state === 'done' ? { state: 'done', reading: outcome.reading } : { state: 'failed', reason: outcome.reason }, m.receivedAt);
  }

  /** True when it settled a request (its event is committed). */
  async function onAck(m: DeviceInMessage): Promise<boolean> {
    const ack = parseAck(Buffer.from(m.payload).toString('utf8'));
    if (!ack) return false;
    if (ack.verb === 'resetenergy') {
      if (ack.token) return settleReset(db, m.deviceId, ack.token, ack.result, ack.reason, m.receivedAt);
      if (ack.result === 'failed') await noteUnmatchedRejection(db, m.deviceId, ack.reason, m.receivedAt);
    } else if (ack.verb === 'sample' && ack.token && (ack.result === 'failed' || ack.result === 'unknown')) {
      // failed: the meter refused the request line itself (e.g. an unreadable token); unknown: its
      // firmware does not know the verb, so no answer will come (the protocol's generic result).
      return settleSample(db, m.deviceId, ack.token, { state: 'failed', reason: ack.result === 'unknown' ? 'unsupported' : 'rejected' }, m.receivedAt);
    }
    return false;
  }

  return isolatingPoison({ read: (msg, now) => readDeviceIn(msg.subject, prefix, msg.data, msg.headers?.get('Received-At') || undefined, now), store: handle, logger });
}

function tokenOf(payload: Uint8Array): string | undefined {
  try {
    const doc = JSON.parse(Buffer.from(payload).toString('utf8')) as { token?: unknown };
    return typeof doc?.token === 'string' ? doc.token : undefined;
  } catch {
    return undefined;
  }
}
