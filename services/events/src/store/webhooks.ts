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
export async function createWebhook(db: EventsDb, row: Omit<WebhookRow, 'createdAt' | 'updatedAt' | 'previousSecret' | 'previousExpiresAt'>, limit: number): Promise<WebhookRow | null> {
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
