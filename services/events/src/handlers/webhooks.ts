/**
 * The events service's bus endpoints: webhook endpoints (create, read, change, delete, rotate the
 * secret, send a test event), their delivery log and redelivery, and the opening of a live
 * stream. The gateway checked the permission (webhook_manage, events_read) and the shape of
 * each request; what only this service can judge (the receiver's address, the limits) is here.
 */
import { isPartnerEventType, newPartnerEventId, subjectsOf, WEBHOOK_TEST_TYPE, type Principal, type RequestEnvelope, type SubjectsOf } from '@fleet/contracts';
import { transactionBy } from '@fleet/db';
import { ConflictError, ForbiddenError, NotFoundError, RateLimitedError, ValidationError, type Bus, type ServiceHandlers } from '@fleet/service-kit';
import type { RegistryClient } from '@fleet/registry-client';
import { DELIVERY_ID, newDeliveryId, newWebhookId, WEBHOOK_ID } from '../domain/ids';
import type { ReceiverPolicy } from '../domain/receiver-url';
import { receiverUrlProblem } from '../domain/receiver-url';
import { sealSecret } from '../domain/secret-box';
import { newSigningSecret } from '../domain/signing';
import { deliveryCursor, deliveryView, parseDeliveryCursor, webhookView } from '../domain/views';
import { hostAllowed } from '../http/receiver-client';
import type { StreamTickets } from '../http/stream-server';
import { findDelivery, insertDelivery, listDeliveries, releaseHeldDeliveries, requeueDelivery, type DeliveryState } from '../store/deliveries';
import type { EventsDb } from '../store/prisma';
import { createWebhook, deleteWebhook, enableWebhook, findWebhook, listWebhooks, rotateSecret, updateWebhook } from '../store/webhooks';

type EventsSubject = SubjectsOf<'events'>;
export const EVENTS_SUBJECTS: readonly EventsSubject[] = subjectsOf('events');

export interface WebhookDeps {
  db: EventsDb;
  secretsKey: Buffer;
  policy: ReceiverPolicy;
  webhooksPerPartner: number;
  /** Deliveries were queued: the local worker sends them now. */
  queued: () => void;
  tickets: StreamTickets;
  registry: Pick<RegistryClient, 'resolveScope'>;
}

const DEFAULT_OVERLAP_S = 86_400;
const MAX_OVERLAP_S = 7 * 86_400;
const DELIVERIES_DEFAULT = 50;
const DELIVERIES_MAX = 200;

function principalOf(req: RequestEnvelope): Principal {
  if (!req.principal) throw new ForbiddenError('A partner key is required.');
  return req.principal;
}

const bodyOf = (req: RequestEnvelope): Record<string, unknown> => (req.body && typeof req.body === 'object' ? (req.body as Record<string, unknown>) : {});
const queryOf = (req: RequestEnvelope): Record<string, unknown> => (req.query ?? {}) as Record<string, unknown>;

function webhookIdOf(req: RequestEnvelope): string {
  const id = req.params.webhook_id ?? '';
  if (!WEBHOOK_ID.test(id)) throw new NotFoundError('Webhook not found.');
  return id;
}

function eventTypesOf(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0) throw new ValidationError("invalid 'event_types': a non-empty array of event types");
  const unknown = value.filter((t) => typeof t !== 'string' || !isPartnerEventType(t));
  if (unknown.length > 0) throw new ValidationError(`invalid 'event_types': unknown type ${JSON.stringify(unknown[0])}`);
  return [...new Set(value as string[])];
}

function descriptionOf(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length > 500) throw new ValidationError("invalid 'description': a string of at most 500 characters, or null");
  return value;
}

export function webhookHandlers(deps: WebhookDeps): ServiceHandlers<EventsSubject> {
  const { db, secretsKey, policy } = deps;

  async function checkedUrl(value: unknown): Promise<string> {
    if (typeof value !== 'string' || value.length > 2048) throw new ValidationError("invalid 'url': an absolute https URL of at most 2048 characters");
    const problem = receiverUrlProblem(value, policy);
    if (problem) throw new ValidationError(`invalid 'url': ${problem}`);
    const host = await hostAllowed(value, policy);
    if (!host.ok) throw new ValidationError(`invalid 'url': ${host.reason}`);
    return value;
  }

  async function ownWebhook(req: RequestEnvelope) {
    const webhook = await findWebhook(db, principalOf(req).partner_id, webhookIdOf(req));
    if (!webhook) throw new NotFoundError('Webhook not found.');
    return webhook;
  }

  return {
    'events.webhook.create': async (req) => {
      const partner = principalOf(req);
      const body = bodyOf(req);
      const url = await checkedUrl(body.url);
      const eventTypes = eventTypesOf(body.event_types);
      const description = descriptionOf(body.description);
      if (body.enabled !== undefined && typeof body.enabled !== 'boolean') throw new ValidationError("invalid 'enabled': a boolean");
      const id = newWebhookId();
      const secret = newSigningSecret();
      const created = await createWebhook(
        db,
        { id, partnerId: partner.partner_id, url, eventTypes, description, enabled: body.enabled !== false, secret: sealSecret(secretsKey, id, secret) },
        deps.webhooksPerPartner,
      );
      if (!created) throw new ForbiddenError(`A partner may register ${deps.webhooksPerPartner} webhooks; delete one first.`, 'limit_reached');
      return { status: 201, headers: { Location: `/v1/webhooks/${id}` }, body: { ...webhookView(created), secret } };
    },

    'events.webhook.list': async (req) => ({ body: { webhooks: (await listWebhooks(db, principalOf(req).partner_id)).map(webhookView) } }),

    'events.webhook.get': async (req) => ({ body: webhookView(await ownWebhook(req)) }),

    'events.webhook.update': async (req, ctx) => {
      const partner = principalOf(req);
      const id = webhookIdOf(req);
      const body = bodyOf(req);
      const patch: Parameters<typeof updateWebhook>[3] = {};
      if (body.url !== undefined) patch.url = await checkedUrl(body.url);
      if (body.event_types !== undefined) patch.eventTypes = eventTypesOf(body.event_types);
      if ('description' in body) patch.description = descriptionOf(body.description);
      if (body.enabled !== undefined) {
        if (typeof body.enabled !== 'boolean') throw new ValidationError("invalid 'enabled': a boolean");
        patch.enabled = body.enabled;
      }
      if (Object.keys(patch).length === 0) throw new ValidationError('Give at least one of url, event_types, description, enabled.');
      const updated = await transactionBy(db, ctx, async (tx) => {
        // Enabled again: what it held is due at once (the retry schedule resumes after that attempt).
        if (patch.enabled === true && (await enableWebhook(tx, partner.partner_id, id))) await releaseHeldDeliveries(tx, id);
        return updateWebhook(tx, partner.partner_id, id, patch);
      });
      if (!updated) throw new NotFoundError('Webhook not found.');
      if (patch.enabled) deps.queued();
      return { body: webhookView(updated) };
    },

    'events.webhook.delete': async (req) => {
      if (!(await deleteWebhook(db, principalOf(req).partner_id, webhookIdOf(req)))) throw new NotFoundError('Webhook not found.');
      return { status: 204 };
    },

    'events.webhook.rotate': async (req) => {
      const webhook = await ownWebhook(req);
      const overlap = bodyOf(req).previous_expires_in_s ?? DEFAULT_OVERLAP_S;
      if (typeof overlap !== 'number' || !Number.isInteger(overlap) || overlap < 0 || overlap > MAX_OVERLAP_S) {
        throw new ValidationError(`invalid 'previous_expires_in_s': a whole number of seconds from 0 to ${MAX_OVERLAP_S}`);
      }
      const secret = newSigningSecret();
      // The current secret becomes the previous one: both sign until it expires (a previous one
      // still signing goes on until its own expiry: store/webhooks.ts rotateSecret). With no
      // overlap every earlier secret stops signing now, and the answer says so with null.
      const expiresAt = overlap > 0 ? new Date(Date.now() + overlap * 1000) : null;
      if (!(await rotateSecret(db, webhook.partnerId, webhook.id, sealSecret(secretsKey, webhook.id, secret), expiresAt))) throw new NotFoundError('Webhook not found.');
      return { body: { id: webhook.id, secret, previous_secret_expires_at: expiresAt ? expiresAt.toISOString() : null } };
    },

    'events.webhook.test': async (req) => {
      const webhook = await ownWebhook(req);
      // A disabled endpoint is sent nothing: a test queued for it would tell the partner nothing.
      if (!webhook.enabled) throw new ConflictError('The webhook endpoint is disabled: enable it (PATCH with "enabled": true) to send it a test event.', 'webhook_disabled');
      const id = newDeliveryId();
      const event = { id: newPartnerEventId(), type: WEBHOOK_TEST_TYPE, version: 1, occurred_at: new Date().toISOString(), data: { webhook_id: webhook.id } };
      const delivery = await insertDelivery(db, { id, webhookId: webhook.id, partnerId: webhook.partnerId, eventId: event.id, eventType: event.type, deviceId: null, orderingKey: id, event });
      deps.queued();
      return { status: 202, body: deliveryView(delivery) };
    },

    'events.delivery.list': async (req) => {
      const webhook = await ownWebhook(req);
      const q = queryOf(req);
      const state = q.state as DeliveryState | undefined;
      if (state !== undefined && !['pending', 'succeeded', 'dead'].includes(state)) throw new ValidationError("invalid 'state': pending, succeeded or dead");
      const limit = q.limit === undefined ? DELIVERIES_DEFAULT : Number(q.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > DELIVERIES_MAX) throw new ValidationError(`invalid 'limit': a whole number from 1 to ${DELIVERIES_MAX}`);
      let beforeSeq: bigint | undefined;
      if (q.cursor !== undefined) {
        beforeSeq = typeof q.cursor === 'string' ? parseDeliveryCursor(q.cursor, webhook.id) : undefined;
        if (beforeSeq === undefined) throw new ValidationError("invalid 'cursor': not a cursor of this endpoint's deliveries; pass next_cursor of its previous page");
      }
      const rows = await listDeliveries(db, webhook.id, { ...(state ? { state } : {}), ...(beforeSeq !== undefined ? { beforeSeq } : {}), limit: limit + 1 });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      const held = !webhook.enabled;
      const hasMore = rows.length > limit && last !== undefined;
      return { body: { deliveries: page.map((d) => deliveryView(d, { held })), next_cursor: hasMore ? deliveryCursor(webhook.id, last.seq) : null, has_more: hasMore } };
    },

    'events.delivery.redeliver': async (req) => {
      const webhook = await ownWebhook(req);
      const deliveryId = req.params.delivery_id ?? '';
      if (!DELIVERY_ID.test(deliveryId) || !(await findDelivery(db, webhook.id, deliveryId))) throw new NotFoundError('Delivery not found.');
      const delivery = await requeueDelivery(db, webhook.id, deliveryId);
      if (!delivery) throw new NotFoundError('Delivery not found.');
      deps.queued();
      // A disabled endpoint's delivery is held until the endpoint is enabled again.
      return { status: 202, body: deliveryView(delivery, { held: !webhook.enabled }) };
    },

    'events.stream.open': async (req, ctx) => {
      const partner = principalOf(req);
      const q = queryOf(req);
      const types = typeof q.types === 'string' && q.types !== '' ? [...new Set(q.types.split(',').map((t) => t.trim()))] : [];
      const unknown = types.find((t) => !isPartnerEventType(t));
      if (unknown !== undefined) throw new ValidationError(`invalid 'types': unknown event type ${JSON.stringify(unknown)}`);
      let deviceId: string | undefined;
      if (q.device_id !== undefined) {
        if (typeof q.device_id !== 'string' || !/^[0-9A-F]{12}$/.test(q.device_id)) throw new ValidationError("invalid 'device_id': 12 upper-case hex digits");
        // Out of scope and nonexistent are the same 404.
        await deps.registry.resolveScope({ requestId: req.request_id, deadline: ctx.deadline }, partner, q.device_id);
        deviceId = q.device_id;
      }
      const lastEventId = typeof q.last_event_id === 'string' ? q.last_event_id : undefined;
      if (lastEventId !== undefined && !/^\d{1,15}$/.test(lastEventId)) throw new ValidationError("invalid 'last_event_id': the id of an event this stream sent");
      const url = await deps.tickets.issue({ partner, types, ...(deviceId ? { deviceId } : {}), ...(lastEventId !== undefined ? { after: Number(lastEventId) } : {}) });
      if (!url) throw new RateLimitedError('This partner holds its most open live streams; close one first.', 5);
      return { body: { url } };
    },
  };
}

export function serveEvents(bus: Bus, deps: WebhookDeps): void {
  bus.serveAll(webhookHandlers(deps));
}
