import { Prisma } from '../generated/prisma/client';
import type { EventsDb, EventsTx } from './prisma';

export type DeliveryState = 'pending' | 'succeeded' | 'dead';

export interface DeliveryRow {
  id: string;
  seq: bigint;
  webhookId: string;
  partnerId: string;
  eventId: string;
  eventType: string;
  deviceId: string | null;
  event: unknown;
  state: string;
  attempts: number;
  nextAttemptAt: Date | null;
  lastAttemptAt: Date | null;
  lastStatus: number | null;
  lastError: string | null;
  lastDurationMs: number | null;
  createdAt: Date;
  deliveredAt: Date | null;
}

export interface NewDelivery {
  id: string;
  webhookId: string;
  partnerId: string;
  eventId: string;
  eventType: string;
  deviceId: string | null;
  /** The device id, or the delivery's own id when the event has no device. */
  orderingKey: string;
  event: unknown;
}

/** A delivery a worker took, with what it needs to send it. */
export interface ClaimedDelivery {
  id: string;
  webhookId: string;
  partnerId: string;
  eventType: string;
  eventId: string;
  event: unknown;
  attempts: number;
  url: string;
  secret: string;
  previousSecret: string | null;
  previousExpiresAt: Date | null;
  olderSecret: string | null;
  olderExpiresAt: Date | null;
}

/** Stores deliveries; one already stored for the same endpoint and event (a redelivered batch) is kept as it is. */
export async function insertDeliveries(db: EventsTx, rows: readonly NewDelivery[]): Promise<number> {
  if (rows.length === 0) return 0;
  return db.$executeRaw`
    INSERT INTO deliveries (id, webhook_id, partner_id, event_id, event_type, device_id, ordering_key, event)
    SELECT id, webhook_id, partner_id, event_id, event_type, device_id, ordering_key, event::jsonb
    FROM unnest(
      ${rows.map((r) => r.id)}::text[], ${rows.map((r) => r.webhookId)}::text[], ${rows.map((r) => r.partnerId)}::text[],
      ${rows.map((r) => r.eventId)}::text[], ${rows.map((r) => r.eventType)}::text[], ${rows.map((r) => r.deviceId)}::text[],
      ${rows.map((r) => r.orderingKey)}::text[], ${rows.map((r) => JSON.stringify(r.event))}::text[])
      WITH ORDINALITY AS t(id, webhook_id, partner_id, event_id, event_type, device_id, ordering_key, event, n)
    -- seq follows the events' order, which per-device ordering relies on.
    ORDER BY n
    ON CONFLICT (webhook_id, event_id) DO NOTHING`;
}

/**
 * Takes up to `limit` deliveries that are due, for `leaseMs`: pending, enabled endpoint, no
 * earlier pending delivery of the same endpoint and device (per-device order), not leased by a
 * live worker, and at most `perEndpoint` leased per endpoint at once (a slow endpoint holds only
 * its own share). Each endpoint with room offers only its own earliest due deliveries, as many
 * as its room, and the earliest `limit` of those are taken: however long one endpoint's backlog
 * (a receiver down or hanging), it can never fill the choice and keep another endpoint's due
 * delivery waiting. Each endpoint's offer is read in order from its own index range, stopping
 * at its room, so the claim costs the same whatever the backlog. The candidates are chosen
 * without locks, then leased by a conditional update, so a delivery two replicas chose is taken
 * by one of them. A new lease starts a fresh attempt: a redelivery asked during the previous one
 * is this attempt.
 */
export async function claimDue(db: EventsDb, limit: number, perEndpoint: number, leaseMs: number): Promise<ClaimedDelivery[]> {
  if (limit <= 0) return [];
  return db.$queryRaw<ClaimedDelivery[]>`
    WITH busy AS (
      SELECT webhook_id, count(*)::int AS n FROM deliveries
      WHERE lease_until > now() AND state = 'pending' GROUP BY webhook_id
    ),
    open AS (
      SELECT w.id, LEAST(${perEndpoint}::int - coalesce(busy.n, 0), ${limit}::int) AS room
      FROM webhooks w LEFT JOIN busy ON busy.webhook_id = w.id
      WHERE w.enabled AND coalesce(busy.n, 0) < ${perEndpoint}::int
    ),
    chosen AS (
      SELECT due.id FROM open CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at, d.seq FROM deliveries d
        WHERE d.webhook_id = open.id AND d.state = 'pending' AND d.next_attempt_at <= now()
          AND (d.lease_until IS NULL OR d.lease_until <= now())
          AND NOT EXISTS (
            SELECT 1 FROM deliveries e
            WHERE e.webhook_id = d.webhook_id AND e.ordering_key = d.ordering_key AND e.state = 'pending' AND e.seq < d.seq)
        ORDER BY d.next_attempt_at, d.seq
        LIMIT open.room
      ) due
      ORDER BY due.next_attempt_at, due.seq
      LIMIT ${limit}::int
    ),
    leased AS (
      UPDATE deliveries d SET lease_until = now() + make_interval(secs => ${leaseMs / 1000}::float8), redelivery_asked = false
      FROM chosen
      WHERE d.id = chosen.id AND d.state = 'pending' AND (d.lease_until IS NULL OR d.lease_until <= now())
      RETURNING d.id, d.webhook_id, d.partner_id, d.event_type, d.event_id, d.event, d.attempts
    )
    SELECT l.id, l.webhook_id AS "webhookId", l.partner_id AS "partnerId", l.event_type AS "eventType", l.event_id AS "eventId", l.event, l.attempts,
      w.url, w.secret, w.previous_secret AS "previousSecret", w.previous_expires_at AS "previousExpiresAt",
      w.older_secret AS "olderSecret", w.older_expires_at AS "olderExpiresAt"
    FROM leased l JOIN webhooks w ON w.id = l.webhook_id`;
}

export interface AttemptOutcome {
  /** When the attempt started. */
  at: Date;
  status: number | null;
  error: string | null;
  /** How long it took: from `at` until the receiver's answer (or the failure). */
  durationMs: number;
}

/**
 * Records an attempt: succeeded, failed with its next attempt at `retryAt`, or dead (failed,
 * no `retryAt`). A success is `delivered_at` the moment the receiver answered (`at` plus the
 * duration). When a redelivery was asked while the attempt was in flight, the attempt is
 * logged but its outcome is not taken: the delivery stays queued as the redelivery left it
 * (pending, due, a fresh schedule), to be sent again now that this attempt is over. One plain
 * statement: it runs once per delivery, the delivery path's hottest write.
 */
export async function settleAttempt(db: EventsTx, id: string, outcome: AttemptOutcome, result: { succeeded: true } | { succeeded: false; retryAt: Date | null }): Promise<void> {
  const state = result.succeeded ? 'succeeded' : result.retryAt ? 'pending' : 'dead';
  const nextAttemptAt = result.succeeded ? null : result.retryAt;
  await db.$executeRaw`
    UPDATE deliveries SET
      state = CASE WHEN redelivery_asked THEN 'pending' ELSE ${state} END,
      attempts = CASE WHEN redelivery_asked THEN attempts ELSE attempts + 1 END,
      next_attempt_at = CASE WHEN redelivery_asked THEN next_attempt_at ELSE ${nextAttemptAt}::timestamptz END,
      delivered_at = CASE WHEN redelivery_asked THEN NULL ELSE ${result.succeeded ? new Date(outcome.at.getTime() + outcome.durationMs) : null}::timestamptz END,
      lease_until = NULL, redelivery_asked = false,
      last_attempt_at = ${outcome.at}::timestamptz, last_status = ${outcome.status}::int, last_error = ${outcome.error}, last_duration_ms = ${outcome.durationMs}::int
    WHERE id = ${id} AND state = 'pending'`;
}

/** The endpoint's deliveries newest first, after the cursor's position. */
export async function listDeliveries(db: EventsTx, webhookId: string, options: { state?: DeliveryState; beforeSeq?: bigint; limit: number }): Promise<DeliveryRow[]> {
  return db.delivery.findMany({
    where: { webhookId, ...(options.state ? { state: options.state } : {}), ...(options.beforeSeq !== undefined ? { seq: { lt: options.beforeSeq } } : {}) },
    orderBy: { seq: 'desc' },
    take: options.limit,
  });
}

export async function findDelivery(db: EventsTx, webhookId: string, id: string): Promise<DeliveryRow | null> {
  return db.delivery.findFirst({ where: { id, webhookId } });
}

/**
 * Queues a delivery again now, with a fresh schedule of attempts (whatever its state). One
 * whose attempt is in flight (leased by a live worker) keeps its lease: a second attempt never
 * runs beside it (the endpoint's share and the device's order hold), and the redelivery is
 * marked so that settling the attempt leaves it queued; it is sent once that attempt is over.
 */
export async function requeueDelivery(db: EventsTx, webhookId: string, id: string): Promise<DeliveryRow | null> {
  const count = await db.$executeRaw`
    UPDATE deliveries SET
      state = 'pending', attempts = 0, next_attempt_at = now(), delivered_at = NULL,
      redelivery_asked = coalesce(lease_until > now(), false),
      lease_until = CASE WHEN lease_until > now() THEN lease_until END
    WHERE id = ${id} AND webhook_id = ${webhookId}`;
  return count === 0 ? null : findDelivery(db, webhookId, id);
}

/**
 * An endpoint enabled again: its pending deliveries, held while it was disabled, are due now
 * (also those whose next retry was due later), so what waited goes out at once.
 */
export async function releaseHeldDeliveries(db: EventsTx, webhookId: string): Promise<number> {
  return db.$executeRaw`
    UPDATE deliveries SET next_attempt_at = now()
    WHERE webhook_id = ${webhookId} AND state = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at > now())`;
}

export async function insertDelivery(db: EventsTx, row: NewDelivery): Promise<DeliveryRow> {
  return db.delivery.create({
    data: { id: row.id, webhookId: row.webhookId, partnerId: row.partnerId, eventId: row.eventId, eventType: row.eventType, deviceId: row.deviceId, orderingKey: row.orderingKey, event: row.event as Prisma.InputJsonValue },
  });
}

/** Deletes settled deliveries older than `before`; returns how many. */
export async function purgeSettled(db: EventsTx, before: Date): Promise<number> {
  return (await db.delivery.deleteMany({ where: { state: { in: ['succeeded', 'dead'] }, createdAt: { lt: before } } })).count;
}

/**
 * When the next delivery may become claimable: the earliest next attempt (or lease end, for a
 * leased one whose worker may have died) of pending deliveries of enabled endpoints that no
 * earlier delivery of the same endpoint and device holds back. Null when there is none.
 */
export async function nextDue(db: EventsTx): Promise<Date | null> {
  const [row] = await db.$queryRaw<Array<{ at: Date | null }>>`
    SELECT min(GREATEST(d.next_attempt_at, coalesce(d.lease_until, d.next_attempt_at))) AS at
    FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id AND w.enabled
    WHERE d.state = 'pending'
      AND NOT EXISTS (
        SELECT 1 FROM deliveries e
        WHERE e.webhook_id = d.webhook_id AND e.ordering_key = d.ordering_key AND e.state = 'pending' AND e.seq < d.seq)`;
  return row?.at ?? null;
}
