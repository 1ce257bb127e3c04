import type { EventsDb, EventsTx } from './prisma';

export interface WebhookRow {
  id: string;
  partnerId: string;
  url: string;
  eventTypes: string[];
  description: string | null;
  enabled: boolean;
  secret: string;
  previousSecret: string | null;
  previousExpiresAt: Date | null;
  olderSecret: string | null;
  olderExpiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

/** An endpoint the fan-out considers for an event (enabled, subscribed to one of the types). */
export interface Subscriber {
  id: string;
  partnerId: string;
  eventTypes: string[];
}

const PARTNER_LOCK = (partnerId: string) => `webhooks:${partnerId}`;

/**
 * Creates an endpoint unless the partner holds `limit` already; null then. The partner's
 * endpoints are counted under a lock on the partner, so two creations racing at the limit
 * cannot both pass.
 */
export async function createWebhook(db: EventsDb, row: Omit<WebhookRow, 'createdAt' | 'updatedAt' | 'previousSecret' | 'previousExpiresAt' | 'olderSecret' | 'olderExpiresAt'>, limit: number): Promise<WebhookRow | null> {
  return db.$transaction(async (tx) => {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext(${PARTNER_LOCK(row.partnerId)}))`;
    if ((await tx.webhook.count({ where: { partnerId: row.partnerId } })) >= limit) return null;
    return tx.webhook.create({ data: row });
  });
}

export async function listWebhooks(db: EventsTx, partnerId: string): Promise<WebhookRow[]> {
  return db.webhook.findMany({ where: { partnerId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
}

/** The partner's endpoint, or null (another partner's is the same as none). */
export async function findWebhook(db: EventsTx, partnerId: string, id: string): Promise<WebhookRow | null> {
  return db.webhook.findFirst({ where: { id, partnerId } });
}

export async function updateWebhook(
  db: EventsTx,
  partnerId: string,
  id: string,
  patch: Partial<Pick<WebhookRow, 'url' | 'eventTypes' | 'description' | 'enabled' | 'secret' | 'previousSecret' | 'previousExpiresAt'>>,
): Promise<WebhookRow | null> {
  const { count } = await db.webhook.updateMany({ where: { id, partnerId }, data: { ...patch, updatedAt: new Date() } });
  return count === 0 ? null : findWebhook(db, partnerId, id);
}

/**
 * Rotates the signing secret in one statement: `sealed` becomes the secret, the current one the
 * previous (signing until `previousExpiresAt`; null: it stops now), and a previous one that still
 * signs is kept as the older one until its own expiry. So a rotation retried after its answer was
 * lost, or two made at once (the row lock orders them, each shifting what the other left), never
 * stops a secret a receiver may still verify with before the expiry it was given. With no overlap
 * every earlier secret stops at once. Null when the endpoint is not the partner's.
 */
export async function rotateSecret(db: EventsTx, partnerId: string, id: string, sealed: string, previousExpiresAt: Date | null): Promise<WebhookRow | null> {
  const keep = previousExpiresAt !== null;
  const count = await db.$executeRaw`
    UPDATE webhooks SET
      older_secret = CASE WHEN ${keep}::boolean AND previous_expires_at > now() THEN previous_secret END,
      older_expires_at = CASE WHEN ${keep}::boolean AND previous_expires_at > now() THEN previous_expires_at END,
      previous_secret = CASE WHEN ${keep}::boolean THEN secret END,
      previous_expires_at = ${previousExpiresAt}::timestamptz,
      secret = ${sealed},
      updated_at = now()
    WHERE id = ${id} AND partner_id = ${partnerId}`;
  return count === 0 ? null : findWebhook(db, partnerId, id);
}

/** Enables a disabled endpoint; false when it is not one of the partner's disabled endpoints (already enabled, or none). */
export async function enableWebhook(db: EventsTx, partnerId: string, id: string): Promise<boolean> {
  return (await db.webhook.updateMany({ where: { id, partnerId, enabled: false }, data: { enabled: true, updatedAt: new Date() } })).count > 0;
}

/** Deletes the endpoint and its deliveries (the log goes with it). */
export async function deleteWebhook(db: EventsTx, partnerId: string, id: string): Promise<boolean> {
  return (await db.webhook.deleteMany({ where: { id, partnerId } })).count > 0;
}

/** Enabled endpoints subscribed to any of the types. */
export async function subscribersOf(db: EventsTx, types: string[]): Promise<Subscriber[]> {
  if (types.length === 0) return [];
  return db.$queryRaw<Subscriber[]>`
    SELECT id, partner_id AS "partnerId", event_types AS "eventTypes"
    FROM webhooks WHERE enabled AND event_types && ${types}::text[]`;
}
