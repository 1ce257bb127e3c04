/**
 * The transactional outbox every service that publishes durable events uses: an event is
 * written with the change it reports (same transaction, table `outbox_events`), so it is
 * published if and only if the change commits, and `OutboxRelay` moves committed events to
 * their JetStream streams, oldest first, deleting each only once the stream stored it.
 *
 * The table has one shape in every service: copy the device registry's Prisma model
 * `OutboxEvent` and generate the migration (scripts/migration-diff.sh):
 *   outbox_events(id BIGSERIAL PRIMARY KEY, subject TEXT, payload JSONB,
 *                 msg_id UUID DEFAULT gen_random_uuid(), created_at TIMESTAMPTZ(3))
 */
import { checkEvent, newPartnerEvent, partnerEventSubject, type EventPayloads, type EventSubject, type PartnerEventFields, type PartnerEventMessage, type PartnerEventType } from '@fleet/contracts';

/** What writing an event needs of a Prisma transaction client. */
export interface OutboxWriter {
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
}

/** What the relay needs of a Prisma client. */
export interface OutboxDb extends OutboxWriter {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
  $transaction<R>(fn: (tx: OutboxDb) => Promise<R>, options?: { maxWait?: number; timeout?: number }): Promise<R>;
}

/** An event waiting in the outbox. */
export interface PendingEvent {
  id: bigint;
  subject: string;
  payload: unknown;
  msgId: string;
}

/** The stream partner-facing events (push events) are kept in: every producing service's relay creates or updates it. */
export const PARTNER_EVENTS_STREAM = 'PARTNER_EVENTS';

/** Writes a durable event inside the change's transaction; its payload is checked here, so a row the relay reads is publishable. */
export async function recordDurableEvent<S extends EventSubject>(tx: OutboxWriter, subject: S, payload: EventPayloads[S]): Promise<void> {
  checkEvent(subject, payload);
  await tx.$executeRawUnsafe('INSERT INTO outbox_events (subject, payload) VALUES ($1, $2::jsonb)', subject, JSON.stringify(payload));
}

/** A partner event (push event) as an outbox row: subject and checked payload, for a statement that writes it with its change. */
export function partnerOutboxEntry(type: PartnerEventType, fields: PartnerEventFields): { subject: EventSubject; payload: PartnerEventMessage } {
  const subject = partnerEventSubject(type);
  return { subject, payload: checkEvent<PartnerEventMessage>(subject, newPartnerEvent(type, fields)) };
}

/** Writes partner events (push events) inside the change's transaction, in order: one statement for any number. */
export async function recordPartnerEvents(tx: OutboxWriter, events: Array<{ type: PartnerEventType } & PartnerEventFields>): Promise<void> {
  if (events.length === 0) return;
  const entries = events.map(({ type, ...fields }) => partnerOutboxEntry(type, fields));
  await tx.$executeRawUnsafe(
    'INSERT INTO outbox_events (subject, payload) SELECT s, p::jsonb FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS e(s, p, n) ORDER BY n',
    entries.map((e) => e.subject),
    entries.map((e) => JSON.stringify(e.payload)),
  );
}

export async function recordPartnerEvent(tx: OutboxWriter, type: PartnerEventType, fields: PartnerEventFields): Promise<void> {
  await recordPartnerEvents(tx, [{ type, ...fields }]);
}

/** Whether any event waits (a cheap look before the relay opens a transaction). */
export async function hasPendingEvents(db: OutboxDb): Promise<boolean> {
  const rows = await db.$queryRawUnsafe<unknown[]>('SELECT 1 FROM outbox_events LIMIT 1');
  return rows.length > 0;
}

/** Inside a transaction: takes the relay's lock until the transaction ends, unless another relay (another replica) holds it. */
export async function tryLockRelay(tx: OutboxDb, key: bigint): Promise<boolean> {
  const [row] = await tx.$queryRawUnsafe<Array<{ locked: boolean }>>('SELECT pg_try_advisory_xact_lock($1::bigint) AS locked', key.toString());
  return row?.locked === true;
}

/** The oldest waiting events, in the order they are published. */
export async function pendingEvents(tx: OutboxDb, limit: number): Promise<PendingEvent[]> {
  const rows = await tx.$queryRawUnsafe<Array<{ id: bigint | number | string; subject: string; payload: unknown; msg_id: string }>>(
    'SELECT id, subject, payload, msg_id::text AS msg_id FROM outbox_events ORDER BY id LIMIT $1::int',
    limit,
  );
  return rows.map((r) => ({ id: BigInt(r.id), subject: r.subject, payload: r.payload, msgId: r.msg_id }));
}

export async function deleteEvents(tx: OutboxDb, ids: bigint[]): Promise<void> {
  if (ids.length > 0) await tx.$executeRawUnsafe('DELETE FROM outbox_events WHERE id = ANY($1::bigint[])', ids.map(String));
}
