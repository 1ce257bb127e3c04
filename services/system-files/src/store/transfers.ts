import type { TransferRecord, TransferState } from '../domain/transfer';
import type { SystemDb, SystemTx } from './prisma';

export interface NewTransfer {
  id: string;
  deviceId: string;
  partnerId: string;
  idempotencyKey: string | null;
  fingerprint: string;
  src: string;
  dest: string;
  sha256: string;
  corrMode: string;
  line: string;
}

export interface StoredTransfer extends TransferRecord {
  fingerprint: string;
}

export async function insertTransfer(db: SystemDb | SystemTx, t: NewTransfer): Promise<void> {
  await db.fileTransfer.create({ data: { ...t, state: 'queued' } });
}

export async function findTransfer(db: SystemDb | SystemTx, deviceId: string, id: string): Promise<StoredTransfer | null> {
  return db.fileTransfer.findFirst({ where: { id, deviceId } });
}

export async function findByIdempotencyKey(db: SystemDb | SystemTx, partnerId: string, key: string): Promise<StoredTransfer | null> {
  return db.fileTransfer.findUnique({ where: { partnerId_idempotencyKey: { partnerId, idempotencyKey: key } } });
}

export async function deleteTransfer(db: SystemDb | SystemTx, id: string): Promise<void> {
  await db.fileTransfer.deleteMany({ where: { id, state: 'queued' } });
}

/** queued → sent once the broker took the addfile line (unless its acknowledgement already settled it). */
export async function markSent(db: SystemDb | SystemTx, id: string, sentAt: Date, ackDeadline: Date): Promise<void> {
  await db.fileTransfer.updateMany({ where: { id, state: 'queued' }, data: { state: 'sent', sentAt, ackDeadline, attempts: { increment: 1 } } });
}

export async function listTransfers(db: SystemDb | SystemTx, deviceId: string, filter: { state?: TransferState; since?: Date }, limit: number): Promise<StoredTransfer[]> {
  return db.fileTransfer.findMany({
    where: { deviceId, ...(filter.state ? { state: filter.state } : {}), ...(filter.since ? { createdAt: { gte: filter.since } } : {}) },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: limit,
  });
}

/**
 * Settles the open transfer an acknowledgement names: by its transfer id (`xfer=` in the line)
 * or, without one, by the line as published. A transfer already terminal stays as it is.
 */
export async function settleTransfer(
  db: SystemDb | SystemTx,
  match: { deviceId: string; transferId: string | null; line: string },
  outcome: { state: 'succeeded' | 'failed'; detail: string; at: Date },
): Promise<number> {
  const where = match.transferId ? { id: match.transferId, deviceId: match.deviceId } : { deviceId: match.deviceId, line: match.line };
  return (await db.fileTransfer.updateMany({ where: { ...where, state: { in: ['queued', 'sent'] } }, data: { state: outcome.state, detail: outcome.detail, settledAt: outcome.at } })).count;
}

/** Sent transfers past their deadline become timed_out; queued ones never published (a crash mid-push) fail. */
export async function settleOverdue(db: SystemDb, now: Date, queuedBefore: Date): Promise<number> {
  const timedOut = await db.fileTransfer.updateMany({
    where: { state: 'sent', ackDeadline: { lt: now } },
    data: { state: 'timed_out', detail: 'no acknowledgement before the deadline; the file may still have arrived (check file_list)', settledAt: now },
  });
  const stale = await db.fileTransfer.updateMany({ where: { state: 'queued', createdAt: { lt: queuedBefore } }, data: { state: 'failed', detail: 'never handed to the broker', settledAt: now } });
  return timedOut.count + stale.count;
}

export async function pruneTransfers(db: SystemDb, before: Date): Promise<number> {
  return (await db.fileTransfer.deleteMany({ where: { createdAt: { lt: before } } })).count;
}
