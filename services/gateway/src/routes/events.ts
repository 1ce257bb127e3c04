import { PARTNER_EVENT_TYPES, WEBHOOK_TEST_TYPE } from '@fleet/contracts';
import { DEVICE_ID_PATTERN } from '@fleet/device-protocol';
import { deviceIdParam, STREAM_POSITION_PATTERN } from './schemas';
import type { ErrorSpec, JsonSchema, RouteDef } from './types';

/**
 * Routes owned by the events service: webhook endpoints with their secrets, delivery logs and
 * redeliveries, and the live event stream (Server-Sent Events, relayed by the gateway as it
 * arrives). The event types and the permission each needs come from the catalog
 * (proto-schemas/events/partner-event-types.json, `@fleet/contracts`).
 */

/** Most webhook endpoints one partner may have. */
export const MAX_WEBHOOKS = 20;
/** Most live streams one partner may hold open at once. */
export const MAX_OPEN_STREAMS = 5;

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const dateTimeOrNull: JsonSchema = { type: ['string', 'null'], format: 'date-time' };

export const WEBHOOK_ID_PATTERN = '^wh_[0-9a-f]{32}$';
export const DELIVERY_ID_PATTERN = '^dlv_[0-9a-f]{32}$';
const webhookId: JsonSchema = { type: 'string', pattern: WEBHOOK_ID_PATTERN, description: '`wh_` followed by 32 lowercase hexadecimal characters.' };
const deliveryId: JsonSchema = { type: 'string', pattern: DELIVERY_ID_PATTERN, description: '`dlv_` followed by 32 lowercase hexadecimal characters.' };

const catalogList = PARTNER_EVENT_TYPES.map((t) => `\`${t}\``).join(', ');

/**
 * The envelope of every event, on webhooks and on the stream: `type` and `data` as given (by
 * default any type and any object).
 */
export function partnerEventSchema(type: JsonSchema = { type: 'string', description: `The event type: ${catalogList}, or \`${WEBHOOK_TEST_TYPE}\` for a test event.` }, data: JsonSchema = { type: 'object', description: 'What happened; its fields depend on `type` (see the webhooks section).' }): JsonSchema {
  return {
    type: 'object',
    required: ['id', 'type', 'version', 'occurred_at', 'data'],
    properties: {
      id: { type: 'string', pattern: '^evt_[0-9a-f]{32}$', description: 'The event id, the same on every delivery and redelivery and on the live stream: deduplicate on it.' },
      type,
      version: { type: 'integer', const: 1, description: 'The version of the type’s `data`; a change that removes or retypes a field comes as a new version.' },
      occurred_at: { ...dateTime, description: 'When it happened.' },
      device_id: { type: 'string', pattern: DEVICE_ID_PATTERN, description: 'The device it is about; absent on a test event.' },
      data: structuredClone(data),
    },
  };
}

const eventTypesField: JsonSchema = {
  type: 'array',
  minItems: 1,
  maxItems: PARTNER_EVENT_TYPES.length,
  uniqueItems: true,
  items: { type: 'string', enum: [...PARTNER_EVENT_TYPES] },
  description: 'The event types to deliver to the endpoint. A type also needs its permission (see the guide): events of a type your key may not receive are not delivered.',
};

const urlField: JsonSchema = {
  type: 'string',
  format: 'uri',
  maxLength: 2048,
  description:
    'Where events are POSTed: an absolute `https://` URL whose host is or resolves to public addresses only. Refused (400): another scheme (plain `http` included), ' +
    'credentials or a fragment in the URL, and a host that is or resolves to a private, loopback or link-local address. (A local fleet for development also takes `http` and loopback receivers.)',
  examples: ['https://hooks.example.com/fleet-events'],
};

const descriptionField: JsonSchema = { type: ['string', 'null'], maxLength: 500, description: 'Your note about the endpoint; at most 500 characters.' };
const enabledField: JsonSchema = { type: 'boolean', description: 'Whether events are delivered to the endpoint (default true).' };

const webhook: JsonSchema = {
  type: 'object',
  required: ['id', 'url', 'event_types', 'description', 'enabled', 'created_at', 'updated_at'],
  properties: {
    id: webhookId,
    url: { type: 'string' },
    event_types: { type: 'array', items: { type: 'string' } },
    description: { type: ['string', 'null'] },
    enabled: { type: 'boolean' },
    created_at: dateTime,
    updated_at: dateTime,
  },
};

const secretField: JsonSchema = {
  type: 'string',
  pattern: '^whsec_[A-Za-z0-9+/=]+$',
  description: 'The signing secret, `whsec_` and base64: shown only in this answer, so store it now. Signatures are keyed with the bytes its base64 part decodes to.',
};

const delivery: JsonSchema = {
  type: 'object',
  required: ['id', 'webhook_id', 'event_id', 'event_type', 'device_id', 'state', 'attempts', 'next_attempt_at', 'last_attempt', 'created_at', 'delivered_at', 'event'],
  properties: {
    id: deliveryId,
    webhook_id: webhookId,
    event_id: { type: 'string', description: 'The event’s `id` (and the `webhook-id` header of each attempt).' },
    event_type: { type: 'string' },
    device_id: { type: ['string', 'null'] },
    state: {
      type: 'string',
      enum: ['pending', 'succeeded', 'dead'],
      description: '`pending`: an attempt is due at `next_attempt_at` (null while the endpoint is disabled: held until it is enabled again, then due at once); `succeeded`: the endpoint answered 2xx; `dead`: every attempt failed.',
    },
    attempts: { type: 'integer', minimum: 0, description: 'Attempts made so far.' },
    next_attempt_at: { ...dateTimeOrNull, description: 'When the next attempt is due; null unless pending, and while the endpoint is disabled.' },
    last_attempt: {
      type: ['object', 'null'],
      required: ['at', 'status', 'error', 'duration_ms'],
      description: 'The latest attempt; null before the first.',
      properties: {
        at: dateTime,
        status: { type: ['integer', 'null'], description: 'Your endpoint’s HTTP status; null when none came (connection refused, timeout).' },
        error: { type: ['string', 'null'], description: 'Why it failed, in words (no answer within 10 s, a refused connection, a status that is not 2xx); null on success.' },
        duration_ms: { type: 'integer', minimum: 0 },
      },
    },
    created_at: dateTime,
    delivered_at: { ...dateTimeOrNull, description: 'When your endpoint acknowledged it; null until then.' },
    event: partnerEventSchema(),
  },
};

const webhookNotFound: ErrorSpec = { status: 404, code: 'not_found', when: 'No such webhook endpoint among yours.' };
const urlRefused: ErrorSpec = {
  status: 400,
  code: 'validation_error',
  when: 'An invalid field; also a `url` the platform refuses: not `https`, with credentials, or whose host is or resolves to a private, loopback or link-local address.',
};

/** Comma-separated catalog types, each at most once (checked by the events service too). */
const typesPattern = (): string => {
  const one = `(?:${PARTNER_EVENT_TYPES.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})`;
  return `^${one}(?:,${one})*$`;
};

const SSE_EXAMPLE = [
  'id: 184467',
  'event: device.connected',
  'data: {"id":"evt_5f0c2a9e7b4d4c1f9a3e8d6b2c1f0e9d","type":"device.connected","version":1,"occurred_at":"2026-11-26T09:14:03.512Z","device_id":"0A1B2C3D4E5F","data":{"status":"connected","status_changed_at":"2026-11-26T09:14:03.512Z"}}',
  '',
  ': keep-alive',
  '',
  '',
].join('\n');

export const eventRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/v1/webhooks',
    operationId: 'createWebhook',
    tag: 'Events',
    summary: 'Create a webhook endpoint',
    description:
      `Events of the chosen types, for devices in your scope, are POSTed to \`url\` signed with the endpoint’s secret (Standard Webhooks; see the webhooks section and the guide). ` +
      `The answer carries the secret, shown this once. At most ${MAX_WEBHOOKS} endpoints per partner.`,
    permission: 'webhook_manage',
    target: { subject: 'events.webhook.create' },
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['url', 'event_types'],
      properties: { url: urlField, event_types: eventTypesField, description: descriptionField, enabled: enabledField },
    },
    idempotent: true,
    responses: {
      201: {
        description: 'Created, with its signing secret (shown only here)',
        headers: ['Location'],
        schema: { ...webhook, required: [...(webhook.required as string[]), 'secret'], properties: { ...(webhook.properties as Record<string, JsonSchema>), secret: secretField } },
      },
    },
    errors: [urlRefused, { status: 403, code: 'limit_reached', when: `You already have ${MAX_WEBHOOKS} webhook endpoints.` }],
  },
  {
    method: 'GET',
    path: '/v1/webhooks',
    operationId: 'listWebhooks',
    tag: 'Events',
    summary: 'Your webhook endpoints',
    description: 'Every endpoint you created, without secrets.',
    permission: 'webhook_manage',
    target: { subject: 'events.webhook.list' },
    responses: { 200: { description: 'The endpoints', schema: { type: 'object', required: ['webhooks'], properties: { webhooks: { type: 'array', items: webhook } } } } },
  },
  {
    method: 'GET',
    path: '/v1/webhooks/{webhook_id}',
    operationId: 'getWebhook',
    tag: 'Events',
    summary: 'One webhook endpoint',
    permission: 'webhook_manage',
    target: { subject: 'events.webhook.get' },
    params: { webhook_id: webhookId },
    responses: { 200: { description: 'The endpoint', schema: webhook } },
    errors: [webhookNotFound],
  },
  {
    method: 'PATCH',
    path: '/v1/webhooks/{webhook_id}',
    operationId: 'updateWebhook',
    tag: 'Events',
    summary: 'Change a webhook endpoint',
    description: 'Any of `url`, `event_types`, `description` and `enabled` (at least one); fields left out keep their value. The secret does not change: rotate it with `POST .../rotate-secret`.',
    permission: 'webhook_manage',
    target: { subject: 'events.webhook.update' },
    params: { webhook_id: webhookId },
    body: {
      type: 'object',
      additionalProperties: false,
      minProperties: 1,
      properties: { url: urlField, event_types: eventTypesField, description: descriptionField, enabled: enabledField },
    },
    responses: { 200: { description: 'The endpoint as it is now', schema: webhook } },
    errors: [urlRefused, webhookNotFound],
  },
  {
    method: 'DELETE',
    path: '/v1/webhooks/{webhook_id}',
    operationId: 'deleteWebhook',
    tag: 'Events',
    summary: 'Delete a webhook endpoint',
    description: 'Nothing more is delivered to it; its pending deliveries are dropped.',
    permission: 'webhook_manage',
    target: { subject: 'events.webhook.delete' },
    params: { webhook_id: webhookId },
    responses: { 204: { description: 'Deleted' } },
    errors: [webhookNotFound],
  },
  {
    method: 'POST',
    path: '/v1/webhooks/{webhook_id}/rotate-secret',
    operationId: 'rotateWebhookSecret',
    tag: 'Events',
    summary: 'Rotate a webhook endpoint’s signing secret',
    description:
      'A new secret, shown this once. Until `previous_secret_expires_at` every delivery is signed with both secrets (two signatures in `webhook-signature`), ' +
      'so you can switch your receiver without losing events; then only with the new one. `previous_expires_in_s: 0` retires every earlier secret at once. ' +
      'A rotation made while the previous secret still signs keeps it signing until its own expiry (three signatures at most), so retrying a rotation whose answer you lost never cuts off the secret your receiver still uses.',
    permission: 'webhook_manage',
    target: { subject: 'events.webhook.rotate' },
    params: { webhook_id: webhookId },
    body: {
      type: 'object',
      additionalProperties: false,
      properties: {
        previous_expires_in_s: { type: 'integer', minimum: 0, maximum: 604800, default: 86400, description: 'How long the old secret keeps signing, in seconds: 0 to 604800 (7 days); default 86400 (a day).' },
      },
    },
    bodyOptional: true,
    responses: {
      200: {
        description: 'The new secret (shown only here)',
        schema: {
          type: 'object',
          required: ['id', 'secret', 'previous_secret_expires_at'],
          properties: { id: webhookId, secret: secretField, previous_secret_expires_at: { ...dateTimeOrNull, description: 'When the old secret stops signing; null when it already has.' } },
        },
      },
    },
    errors: [webhookNotFound],
  },
  {
    method: 'POST',
    path: '/v1/webhooks/{webhook_id}/test',
    operationId: 'testWebhook',
    tag: 'Events',
    summary: 'Send a test event to a webhook endpoint',
    description: `A \`${WEBHOOK_TEST_TYPE}\` event is delivered to the endpoint whatever types it subscribes to, signed and retried like any other event. Follow it in the delivery log.`,
    permission: 'webhook_manage',
    target: { subject: 'events.webhook.test' },
    params: { webhook_id: webhookId },
    responses: { 202: { description: 'The delivery, queued', schema: delivery } },
    errors: [webhookNotFound, { status: 409, code: 'webhook_disabled', when: 'The endpoint is disabled: enable it first (nothing is queued).' }],
  },
  {
    method: 'GET',
    path: '/v1/webhooks/{webhook_id}/deliveries',
    operationId: 'listWebhookDeliveries',
    tag: 'Events',
    summary: 'A webhook endpoint’s delivery log, newest first',
    description: 'Every event sent to the endpoint in the last 30 days, with its attempts and state. Page with `next_cursor` (null on the last page).',
    permission: 'webhook_manage',
    target: { subject: 'events.delivery.list' },
    params: { webhook_id: webhookId },
    query: {
      properties: {
        state: { type: 'string', enum: ['pending', 'succeeded', 'dead'], description: 'Only deliveries in this state.' },
        limit: { type: 'integer', minimum: 1, maximum: 200, description: 'Deliveries per page (default 50).' },
        cursor: { type: 'string', minLength: 1, maxLength: 512, description: 'The previous answer’s next_cursor.' },
      },
    },
    responses: {
      200: {
        description: 'A page of the log',
        schema: { type: 'object', required: ['deliveries', 'next_cursor', 'has_more'], properties: { deliveries: { type: 'array', items: delivery }, next_cursor: { type: ['string', 'null'] }, has_more: { type: 'boolean', description: 'Another page waits: pass next_cursor as cursor.' } } },
      },
    },
    errors: [{ status: 400, code: 'validation_error', when: 'An invalid parameter, or a cursor that is not one of this endpoint’s.' }, webhookNotFound],
  },
  {
    method: 'POST',
    path: '/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver',
    operationId: 'redeliverWebhookDelivery',
    tag: 'Events',
    summary: 'Send a delivery again',
    description:
      'Whatever its state, the delivery is queued again now, with a fresh schedule of attempts; the event and its `id` are unchanged (deduplicate on it). ' +
      'If an attempt of it is in flight, no second one starts beside it: that attempt runs to its end (its outcome shows in `last_attempt` but is not kept) and the delivery is sent again as soon as it is over.',
    permission: 'webhook_manage',
    target: { subject: 'events.delivery.redeliver' },
    params: { webhook_id: webhookId, delivery_id: deliveryId },
    responses: { 202: { description: 'The delivery, queued again', schema: delivery } },
    errors: [{ status: 404, code: 'not_found', when: 'No such webhook endpoint among yours, or no such delivery of it.' }],
  },
  {
    method: 'GET',
    path: '/v1/events',
    operationId: 'streamEvents',
    tag: 'Events',
    summary: 'The live event stream (Server-Sent Events)',
    description:
      'A `text/event-stream` answer that stays open: every event you may receive, as it happens. Each event is a frame `id: <position>`, `event: <type>`, `data: <the event as JSON>` and a blank line; ' +
      'a `: keep-alive` comment comes every 15 s. To resume after a disconnection, send the last `id:` you received as `Last-Event-ID` (EventSource does) or `last_event_id`: ' +
      'events of the last 7 days after it are replayed first. Without either the stream starts with new events. ' +
      `At most ${MAX_OPEN_STREAMS} streams per partner are open at once; the stream is not subject to a request timeout.`,
    permission: 'events_read',
    target: { stream: 'events.stream.open' },
    query: {
      properties: {
        types: {
          type: 'string',
          pattern: typesPattern(),
          'x-expected': 'event types of the catalog, comma-separated without spaces (e.g. device.connected,device.disconnected)',
          description: `Only these event types, comma-separated (no spaces): any of ${catalogList}. Default: every type your permissions allow.`,
        },
        device_id: { ...deviceIdParam, description: 'Only events of this device (12 uppercase hexadecimal characters); it must be in your scope.' },
        last_event_id: { type: 'string', pattern: STREAM_POSITION_PATTERN, description: 'Resume after this stream position (the `id:` of an event), for clients that cannot send the `Last-Event-ID` header; the header wins.' },
      },
    },
    responses: {
      200: {
        description: 'The stream: `Content-Type: text/event-stream`, `Cache-Control: no-store` and `X-Accel-Buffering: no`; it stays open until you close it.',
        contentType: 'text/event-stream',
        schema: { type: 'string', description: 'Server-Sent Events frames; `data` is the event envelope as JSON.' },
        example: SSE_EXAMPLE,
        headers: ['X-Accel-Buffering'],
      },
    },
    errors: [
      { status: 400, code: 'validation_error', when: 'An unknown event type in `types`, a malformed `device_id`, or a `Last-Event-ID` or `last_event_id` that is not a stream position.' },
      { status: 404, code: 'not_found', when: 'The `device_id` does not exist or is outside your scope.' },
      {
        status: 429,
        code: 'rate_limited',
        when: `You already hold ${MAX_OPEN_STREAMS} open streams, or the per-partner request limit (your account’s \`rate_limits.requests_per_min\`; opening a stream spends one request) was reached. Wait \`Retry-After\` seconds.`,
      },
      { status: 503, code: 'service_unavailable', when: 'The event service is down or its stream could not be opened; retry after `Retry-After` seconds (with `Last-Event-ID`, nothing is lost).' },
    ],
  },
];
