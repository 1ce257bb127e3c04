import { CHANNELS, PERMISSIONS } from '@fleet/contracts';
import { isoSeconds, TIME_MAX_MS, TIME_MIN_MS } from '@fleet/service-kit';
import type { JsonSchema } from './types';
import { DEVICE_ID_PATTERN } from '@fleet/device-protocol';

/** Response and body schemas shared by the route table and the OpenAPI document. */

/**
 * Pattern of name-like text (display names, organization names, command names, zones): no C0
 * control characters and no DEL. The gateway refuses U+0000 in any text; this pattern also
 * refuses U+0001–U+001F and U+007F where it is declared.
 */
export const CONTROL_FREE_PATTERN = '^[^\\u0000-\\u001F\\u007F]*$';

/** A name-like text field: `schema` plus the control-free pattern. */
export const nameText = (schema: JsonSchema = {}): JsonSchema => ({ type: 'string', ...schema, pattern: CONTROL_FREE_PATTERN });

/**
 * Supported range of every date/time query parameter (inclusive): the owning services parse them
 * with the kit's parseTimeParam, whose range this states for the guide and the reference.
 */
export const TIME_RANGE = {
  min: isoSeconds(TIME_MIN_MS),
  max: isoSeconds(TIME_MAX_MS),
  minEpochSeconds: TIME_MIN_MS / 1000,
  maxEpochSeconds: TIME_MAX_MS / 1000,
} as const;
export const TIME_RANGE_TEXT = `from ${TIME_RANGE.min} to ${TIME_RANGE.max} (epoch seconds ${TIME_RANGE.minEpochSeconds} to ${TIME_RANGE.maxEpochSeconds}); outside it is 400 \`validation_error\``;

export const errorSchema: JsonSchema = {
  type: 'object',
  required: ['error', 'code', 'request_id'],
  properties: {
    error: { type: 'string', description: 'A sentence for people; may be reworded.' },
    code: { type: 'string', description: 'A stable word to branch on. New codes may be added; handle unknown ones by HTTP status.' },
    request_id: { type: 'string', description: 'The same value as the X-Request-Id header.' },
    required_permission: { type: 'string', enum: [...PERMISSIONS], description: 'Present on a 403 that this permission would lift.' },
    count: { type: 'integer', description: '409 `in_use`: how many sensors still use the profile.' },
    status: { type: ['string', 'null'], enum: ['connected', 'disconnected', null], description: '409 `device_offline`: the device’s connectivity.' },
    status_changed_at: { type: ['string', 'null'], format: 'date-time', description: '409 `device_offline`: when the status last changed.' },
    last_seen_at: { type: ['string', 'null'], format: 'date-time', description: '409 `device_offline`: when the platform last heard from the device.' },
  },
};

export const accountSchema: JsonSchema = {
  type: 'object',
  required: ['partner'],
  properties: {
    partner: {
      type: 'object',
      required: ['name', 'key_prefix', 'permissions', 'allowed_channels', 'rate_limits'],
      properties: {
        name: { type: 'string' },
        key_prefix: { type: 'string', description: 'The public `<prefix>_<handle>` part of the key used.' },
        permissions: {
          type: 'object',
          description: 'Every permission, granted (true) or not (false). None implies another.',
          required: [...PERMISSIONS],
          properties: Object.fromEntries(PERMISSIONS.map((p) => [p, { type: 'boolean' }])),
          additionalProperties: false,
        },
        allowed_channels: { type: 'array', items: { type: 'string', enum: [...CHANNELS] } },
        rate_limits: {
          type: 'object',
          required: ['requests_per_min', 'device_commands_per_min'],
          properties: { requests_per_min: { type: 'integer' }, device_commands_per_min: { type: 'integer' } },
        },
      },
    },
  },
};

export const deviceIdParam: JsonSchema = {
  type: 'string',
  pattern: DEVICE_ID_PATTERN,
  description: '12 uppercase hexadecimal characters.',
};

/**
 * A position in the live event stream (the `id:` of an SSE frame, the `Last-Event-ID` header and
 * the `last_event_id` query parameter): decimal digits.
 */
export const STREAM_POSITION_PATTERN = '^[0-9]{1,15}$';
