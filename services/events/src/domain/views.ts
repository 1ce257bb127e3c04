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

export function deliveryView(d: DeliveryRow): Record<string, unknown> {
  return {
    id: d.id,
    webhook_id: d.webhookId,
    event_id: d.eventId,
    event_type: d.eventType,
    device_id: d.deviceId,
    state: d.state,
    attempts: d.attempts,
    next_attempt_at: d.state === 'pending' && d.nextAttemptAt ? d.nextAttemptAt.toISOString() : null,
    last_attempt: d.lastAttemptAt ? { at: d.lastAttemptAt.toISOString(), status: d.lastStatus, error: d.lastError, duration_ms: d.lastDurationMs ?? 0 } : null,
    created_at: d.createdAt.toISOString(),
    delivered_at: d.deliveredAt ? d.deliveredAt.toISOString() : null,
    event: inEnvelopeOrder(d.event as Record<string, unknown>),
  };
}

/** The deliveries list's cursor: the position to continue below (opaque to partners). */
export function deliveryCursor(seq: bigint): string {
  return Buffer.from(`d:${seq}`).toString('base64url');
}

export function parseDeliveryCursor(cursor: string): bigint | undefined {
  const match = /^d:(\d{1,19})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  return match ? BigInt(match[1] as string) : undefined;
}
