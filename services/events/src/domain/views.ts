/** The partner-facing shapes of endpoints and deliveries (see the gateway's route rows). */
import { inEnvelopeOrder } from '@fleet/contracts';
import type { DeliveryRow } from '../store/deliveries';
import type { WebhookRow } from '../store/webhooks';

export function webhookView(w: WebhookRow): Record<string, unknown> {
  return {
    id: w.id,
    url: w.url,
    event_types: w.eventTypes,
    description: w.description,
    enabled: w.enabled,
    created_at: w.createdAt.toISOString(),
    updated_at: w.updatedAt.toISOString(),
  };
}

/**
 * A delivery as partners read it. `held`: its endpoint is disabled, so a pending delivery is not
 * being attempted (no `next_attempt_at`); it is sent as soon as the endpoint is enabled again.
 */
export function deliveryView(d: DeliveryRow, options: { held?: boolean } = {}): Record<string, unknown> {
  return {
    id: d.id,
    webhook_id: d.webhookId,
    event_id: d.eventId,
    event_type: d.eventType,
    device_id: d.deviceId,
    state: d.state,
    attempts: d.attempts,
    next_attempt_at: d.state === 'pending' && d.nextAttemptAt && !options.held ? d.nextAttemptAt.toISOString() : null,
    last_attempt: d.lastAttemptAt ? { at: d.lastAttemptAt.toISOString(), status: d.lastStatus, error: d.lastError, duration_ms: d.lastDurationMs ?? 0 } : null,
    created_at: d.createdAt.toISOString(),
    delivered_at: d.deliveredAt ? d.deliveredAt.toISOString() : null,
    event: inEnvelopeOrder(d.event as Record<string, unknown>),
  };
}

/**
 * The deliveries list's cursor: the endpoint it belongs to and the position to continue below
 * (opaque to partners). A cursor is bound to its endpoint: another endpoint's is refused.
 */
export function deliveryCursor(webhookId: string, seq: bigint): string {
  return Buffer.from(`d:${webhookId}:${seq}`).toString('base64url');
}

/** The position of a cursor of this endpoint's deliveries; undefined for anything else (another endpoint's cursor included). */
export function parseDeliveryCursor(cursor: string, webhookId: string): bigint | undefined {
  const match = /^d:(wh_[0-9a-f]{32}):(\d{1,19})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  return match && match[1] === webhookId ? BigInt(match[2] as string) : undefined;
}
