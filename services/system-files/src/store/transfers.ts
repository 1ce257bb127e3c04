import { recordPartnerEvents } from '@fleet/service-kit';
import { transferView, type TransferRecord, type TransferState } from '../domain/transfer';
import { Prisma } from '../generated/prisma/client';
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

/**
 * queued → sent once the broker took the addfile line. A fast device's acknowledgement may have
 * settled it already (settleTransfer then dated the send by the acknowledgement): its state stays,
 * and it gets the broker's send time and the deadline it had.
 */
export async function markSent(db: SystemDb | SystemTx, id: string, sentAt: Date, ackDeadline: Date): Promise<void> {
  await db.$executeRaw`
    UPDATE file_transfers SET
      state = CASE WHEN state = 'queued' THEN 'sent' ELSE state END,
      attempts = CASE WHEN state = 'queued' THEN attempts + 1 ELSE greatest(attempts, 1) END,
      sent_at = ${sentAt}, ack_deadline = ${ackDeadline}
    WHERE id = ${id} AND (state = 'queued' OR (state IN ('succeeded', 'failed') AND ack_deadline IS NULL))`;
}

export async function listTransfers(db: SystemDb | SystemTx, deviceId: string, filter: { state?: TransferState; since?: Date }, limit: number): Promise<StoredTransfer[]> {
  return db.fileTransfer.findMany({
    where: { deviceId, ...(filter.state ? { state: filter.state } : {}), ...(filter.since ? { createdAt: { gte: filter.since } } : {}) },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: limit,
  });
}

/** A transfer's columns under TransferRecord's names, for statements that return the rows they changed. */
const RECORD_COLUMNS = Prisma.sql`id, device_id AS "deviceId", state, src, dest, sha256, corr_mode AS "corrMode", attempts, detail,
  created_at AS "createdAt", sent_at AS "sentAt", ack_deadline AS "ackDeadline", settled_at AS "settledAt"`;

/**
 * The partners' file_transfer.settled events of transfers that just reached a terminal state,
 * in the transaction that stored it: `data` is the transfer as GET .../files/{transfer_id}
 * answers it.
 */
export async function recordSettledEvents(tx: SystemTx, settled: readonly TransferRecord[]): Promise<void> {
  await recordPartnerEvents(
    tx,
    settled.map((t) => ({ type: 'file_transfer.settled' as const, deviceId: t.deviceId, occurredAt: t.settledAt ?? undefined, data: transferView(t) })),
  );
}

/**
 * Settles the open transfer an acknowledgement names: by its transfer id (`xfer=` in the line)
 * or, without one, by the line as published, with its file_transfer.settled event. A transfer
 * already terminal stays as it is and announces nothing: the update is conditional on an open
 * state, so of two replicas (or an acknowledgement and the deadline sweep) one settles it.
 * Returns the transfers it settled.
 */
export async function settleTransfer(
  tx: SystemTx,
  match: { deviceId: string; transferId: string | null; line: string },
  outcome: { state: 'succeeded' | 'failed'; detail: string; at: Date },
): Promise<TransferRecord[]> {
  const which = match.transferId !== null ? Prisma.sql`id = ${match.transferId}` : Prisma.sql`line = ${match.line}`;
  // An acknowledgement of a transfer still queued (it came before markSent) proves the line was
  // sent: until markSent writes the broker's time, the send is dated by the acknowledgement.
  const settled = await tx.$queryRaw<TransferRecord[]>`
    UPDATE file_transfers SET state = ${outcome.state}, detail = ${outcome.detail}, settled_at = ${outcome.at},
      sent_at = coalesce(sent_at, ${outcome.at}), attempts = greatest(attempts, 1)
    WHERE device_id = ${match.deviceId} AND ${which} AND state IN ('queued', 'sent')
    RETURNING ${RECORD_COLUMNS}`;
  await recordSettledEvents(tx, settled);
  return settled;
}

const TIMED_OUT_DETAIL = 'no acknowledgement before the deadline; the file may still have arrived (check file_list)';
const UNKNOWN_SEND_DETAIL = 'the platform stopped before it knew whether the broker took the push; the file may have arrived (check file_list)';

/**
 * Sent transfers past their deadline become timed_out; so do queued ones left by a push whose
 * process stopped between storing the transfer and learning the publish's outcome (the broker
 * may have taken the line: only the device can say, so not `failed`, which is the device's
 * report); each with its file_transfer.settled event, in one transaction. Every replica may run
 * it: the update is conditional on the state, so a transfer is settled (and announced) once.
 * Returns how many it settled.
 */
export async function settleOverdue(db: SystemDb, now: Date, queuedBefore: Date): Promise<number> {
  return db.$transaction(async (tx) => {
    const settled = await tx.$queryRaw<TransferRecord[]>`
      UPDATE file_transfers SET
        state = 'timed_out',
        detail = CASE WHEN state = 'sent' THEN ${TIMED_OUT_DETAIL} ELSE ${UNKNOWN_SEND_DETAIL} END,
        settled_at = ${now}
      WHERE (state = 'sent' AND ack_deadline < ${now}) OR (state = 'queued' AND created_at < ${queuedBefore})
      RETURNING ${RECORD_COLUMNS}`;
    await recordSettledEvents(tx, settled);
    return settled.length;
  });
}

export async function pruneTransfers(db: SystemDb, before: Date): Promise<number> {
  return (await db.fileTransfer.deleteMany({ where: { createdAt: { lt: before } } })).count;
}
