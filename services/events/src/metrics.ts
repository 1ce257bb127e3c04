import { counter, gauge, histogram } from '@fleet/service-kit';

/** Delivery attempts by outcome: `succeeded`, `retrying` (failed, another attempt is scheduled), `dead` (the last one failed) or `withdrawn` (not sent: the partner may no longer receive it). */
export const deliveryAttempts = counter('fleet_webhook_attempts_total', 'Webhook delivery attempts by outcome.', ['outcome']);

/** How long receivers took to answer (or the attempt to fail). */
export const deliveryDuration = histogram('fleet_webhook_attempt_duration_seconds', 'Duration of a webhook delivery attempt.', []);

/** From an event happening to its first successful delivery (only first attempts that succeed: a latency, not a retry count). */
export const eventToDelivery = histogram('fleet_webhook_event_to_delivery_seconds', 'From occurred_at to the delivery answered 2xx, for deliveries that succeeded at their first attempt.', []);

/** Deliveries the fan-out stored. */
export const fannedOut = counter('fleet_events_fanned_out_total', 'Deliveries the fan-out created from partner events.', []);

/** Live streams open on this replica. */
export const openStreams = gauge('fleet_event_streams_open', 'Live event streams (GET /v1/events) open on this replica.', []);
