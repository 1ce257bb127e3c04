import { partnerOutboxEntry } from '@fleet/service-kit';
import { feedEventType, feedRowView, type FeedLine } from '../domain/feed';
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
 *
 * The same statement writes the partner event of each row it stores (an acknowledgement:
 * system.ack_received, a log line: system.log_received; `data` is the row as the feed shows it)
 * into the outbox: a line the feed already holds stores nothing and announces nothing, nor does
 * a line received before its device id was last removed (a late line of the removed device: the
 * removal takes FEED_LOCK_KEY too, so this statement sees it once it committed).
 * Returns the number of events written.
 */
export async function appendFeedRows(tx: SystemTx, rows: NewFeedRow[]): Promise<number> {
  if (rows.length === 0) return 0;
  const seen = new Set<string>();
  const input = rows.flatMap((r) => {
    // The same capture twice in one batch: stored once, so announced once.
    const key = JSON.stringify([r.deviceId, r.msgId]);
    if (seen.has(key)) return [];
    seen.add(key);
    const type = feedEventType(r.kind);
    const event = type ? partnerOutboxEntry(type, { deviceId: r.deviceId, occurredAt: r.receivedAt, data: feedRowView(r) }) : null;
    return [
      {
        device_id: r.deviceId,
        kind: r.kind,
        line: r.line,
        command: r.command,
        result: r.result,
        received_at: r.receivedAt.toISOString(),
        msg_id: r.msgId,
        subject: event?.subject ?? null,
        payload: event?.payload ?? null,
      },
    ];
  });
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(${FEED_LOCK_KEY})`;
  const [written] = await tx.$queryRaw<Array<{ events: number }>>`
    WITH input AS (
      SELECT * FROM ROWS FROM (
        json_to_recordset(${JSON.stringify(input)}::json)
          AS (device_id text, kind text, line text, command text, result text, received_at timestamptz, msg_id text, subject text, payload jsonb)
      ) WITH ORDINALITY AS r(device_id, kind, line, command, result, received_at, msg_id, subject, payload, n)
    ),
    stored AS (
      INSERT INTO responses (device_id, kind, line, command, result, received_at, msg_id)
      SELECT device_id, kind, line, command, result, received_at, msg_id FROM input i
      WHERE NOT EXISTS (SELECT 1 FROM device_removals d WHERE d.device_id = i.device_id AND d.removed_at >= i.received_at)
      ORDER BY n
      ON CONFLICT (device_id, msg_id) DO NOTHING
      RETURNING device_id, msg_id
    ),
    announced AS (
      INSERT INTO outbox_events (subject, payload)
      SELECT i.subject, i.payload FROM input i JOIN stored s ON s.device_id = i.device_id AND s.msg_id = i.msg_id
      WHERE i.subject IS NOT NULL ORDER BY i.n
      RETURNING 1
    )
    SELECT count(*)::int AS events FROM announced`;
  return written?.events ?? 0;
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
