import type { FeedLine } from '../domain/feed';
import { FEED_LOCK_KEY, type SystemTx } from './prisma';

export interface NewFeedRow extends FeedLine {
  deviceId: string;
  receivedAt: Date;
  msgId: string;
}

export interface FeedRow {
  id: bigint;
  kind: string;
  line: string;
  receivedAt: Date;
}

/**
 * Appends lines to the feed inside the caller's transaction, holding FEED_LOCK_KEY until it
 * commits: ids are then handed out in commit order, so a cursor (the last id read) never passes
 * a row that is still to commit. A line delivered again (same capture id) is stored once.
 */
export async function appendFeedRows(tx: SystemTx, rows: NewFeedRow[]): Promise<void> {
  if (rows.length === 0) return;
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(${FEED_LOCK_KEY})`;
  await tx.$executeRaw`
    INSERT INTO responses (device_id, kind, line, command, result, received_at, msg_id)
    SELECT r.device_id, r.kind, r.line, r.command, r.result, r.received_at, r.msg_id
    FROM json_to_recordset(${JSON.stringify(rows.map((r) => ({ ...r, device_id: r.deviceId, received_at: r.receivedAt.toISOString(), msg_id: r.msgId })))}::json)
      AS r(device_id text, kind text, line text, command text, result text, received_at timestamptz, msg_id text)
    ON CONFLICT (device_id, msg_id) DO NOTHING`;
}

/** Rows after a cursor (an id), or received at or after `since`, oldest first; one more than `limit` tells has_more. */
export async function readFeed(db: SystemTx, deviceId: string, from: { afterId: bigint } | { since: Date }, limit: number): Promise<FeedRow[]> {
  const where = 'afterId' in from ? { deviceId, id: { gt: from.afterId } } : { deviceId, receivedAt: { gte: from.since } };
  return db.responseRow.findMany({ where, orderBy: { id: 'asc' }, take: limit + 1, select: { id: true, kind: true, line: true, receivedAt: true } });
}

/** The device's newest row id (0 when it has none): the bookmark of an empty page. */
export async function feedHighWater(db: SystemTx, deviceId: string): Promise<bigint> {
  const row = await db.responseRow.findFirst({ where: { deviceId }, orderBy: { id: 'desc' }, select: { id: true } });
  return row?.id ?? 0n;
}

/** Deletes rows older than the retention. */
export async function pruneFeed(db: SystemTx, before: Date): Promise<number> {
  return db.$executeRaw`DELETE FROM responses WHERE received_at < ${before}`;
}
