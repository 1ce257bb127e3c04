import type { Permission } from '@fleet/contracts';
import type { LimitClass } from '../limits/classes';

/**
 * Reference text shared by the OpenAPI document and the partner guide, taken from the
 * partner API contract. One place, so the two never disagree.
 */

export interface ErrorCodeInfo {
  /** HTTP status; 500 stands for any 5xx `internal_error`. */
  status: number;
  code: string;
  meaning: string;
}

/** Every error code the contract names, plus the gateway-wide ones, in status order. */
export const ERROR_CODES: readonly ErrorCodeInfo[] = [
  { status: 400, code: 'validation_error', meaning: 'Bad channel, command, parameter, body, query, organization name, range or webhook URL; also a body that is not a JSON object, text with U+0000 (or control characters in a name), a time outside 1970-01-01T00:00:00Z–9999-12-31T23:59:59Z, a header sent twice, or a request that is not valid HTTP.' },
  { status: 401, code: 'unauthorized', meaning: 'Missing, malformed, unknown, revoked or disabled key.' },
  { status: 403, code: 'forbidden', meaning: 'Not permitted for this permission, channel, command or setting.' },
  { status: 403, code: 'node_out_of_scope', meaning: 'Target organization node outside your granted scope.' },
  { status: 403, code: 'limit_reached', meaning: '50 partner-owned profiles, 50 partner-owned signals or 20 webhook endpoints reached.' },
  { status: 403, code: 'https_required', meaning: 'The request was sent over plain HTTP; use HTTPS.' },
  { status: 404, code: 'not_found', meaning: 'Device outside your scope or nonexistent; profile or signal not global or your own; sensor not attached; token not issued for the device; webhook endpoint or delivery not yours.' },
  { status: 404, code: 'unknown_route', meaning: 'No route matches the URL.' },
  { status: 405, code: 'method_not_allowed', meaning: 'The path exists, but not with that method.' },
  { status: 409, code: 'conflict', meaning: 'Device id already in use, or platform file name already exists.' },
  { status: 409, code: 'confirmation_required', meaning: 'Destructive call with a missing or mismatched `confirm`.' },
  { status: 409, code: 'would_lose_access', meaning: 'Organization move that would remove your own access.' },
  { status: 409, code: 'already_attached', meaning: 'Sensor already on that device.' },
  { status: 409, code: 'name_taken', meaning: 'Profile or signal name already exists.' },
  { status: 409, code: 'in_use', meaning: 'Profile still assigned to sensors.' },
  { status: 409, code: 'encryption_unavailable', meaning: 'A secret setting cannot be encrypted for the device; nothing was sent.' },
  { status: 409, code: 'device_offline', meaning: 'Live reading asked of a meter that is not connected.' },
  { status: 409, code: 'idempotency_in_progress', meaning: 'The same Idempotency-Key is still running; retry after `Retry-After` seconds.' },
  { status: 408, code: 'request_timeout', meaning: 'The request (its headers or body) did not arrive in time.' },
  { status: 413, code: 'payload_too_large', meaning: 'Uploaded file over 32 MB, or a JSON request body over 1 MB.' },
  { status: 415, code: 'unsupported_media_type', meaning: 'Body not sent as `application/json` in UTF-8, or a `Content-Encoding` other than `identity`.' },
  { status: 422, code: 'idempotency_key_reused', meaning: 'Idempotency-Key already used with a different request.' },
  { status: 431, code: 'headers_too_large', meaning: 'The request line and headers exceed 16 KB.' },
  { status: 429, code: 'rate_limited', meaning: 'A rate limit was reached, or you already hold 5 open event streams; honor `Retry-After`.' },
  { status: 500, code: 'internal_error', meaning: 'Internal failure (any 5xx status).' },
  { status: 503, code: 'publish_failed', meaning: 'A valid command could not be delivered to the device broker.' },
  { status: 503, code: 'broker_unavailable', meaning: 'Provisioning or removal could not reach the device broker; nothing was changed. Retry.' },
  { status: 503, code: 'service_unavailable', meaning: 'The service behind the route is temporarily unavailable; retry after `Retry-After` seconds.' },
];

/** What each permission grants, in the order the contract lists them. */
export const PERMISSION_GRANTS: Readonly<Record<Permission, string>> = {
  state_read: 'Read a light’s latest state (`GET …/state`).',
  health_read: 'Read a device’s health (`GET …/health`), and the connectivity fields on devices.',
  device_provisioning: 'Provision devices (`POST /v1/devices/{device_id}`); an organization-scoped partner must name an organization in its scope.',
  device_removal: 'Remove any in-scope device (`DELETE /v1/devices/{device_id}`); destructive tier.',
  system_read: 'System reads: settings, status, responses, file list, command registry, transfer status.',
  system_control: 'System verbs, ordinary settings writes, file pushes, meter report.',
  system_destructive: 'Destructive verbs and connection/identity settings writes (with `confirm`).',
  file_upload: 'Upload platform files.',
  file_delete: 'Delete platform files.',
  config_read: 'Organization tree, device configuration, sensor lists, profile and signal listings.',
  config_write: 'Rename, organization move, sensor attach/detach/profile, choose a light’s alert signal.',
  profile_manage: 'Create, update and delete your own alert profiles.',
  signal_manage: 'Create, update and delete your own alert signals.',
  raw_commands: 'Send raw light commands (`POST …/commands`).',
  predefined_commands: 'The whole predefined command catalog, except commands staff withdrew for your account: list it with your bounds (`GET /v1/commands`) and send effects (`POST …/effects`).',
  relaxed_caps: 'Raw commands may exceed availability caps.',
  automation_control: 'Suspend or resume light automation (`PUT …/automation`).',
  energy_read: 'Meter intervals, summary, energy and live reading.',
  energy_reset: 'Meter energy reset and its polling; destructive tier; not implied by `system_destructive`.',
  access_all_devices: 'Every device in the fleet, including future ones.',
  raw_mqtt_devices: 'Raw MQTT under in-scope device topics (internal only).',
  raw_mqtt_global: 'Raw MQTT on any topic (internal only).',
  events_read: 'The live event stream (`GET /v1/events`): events of devices in your scope, of the types your other permissions let you receive.',
  webhook_manage: 'Webhook endpoints (`/v1/webhooks`): create, list, update and delete them, rotate their secrets, send test events, read delivery logs and redeliver. Each event type still needs the permission to receive it.',
};

/** The limit classes a route may spend from besides the per-partner request limit. */
export const LIMIT_CLASS_INFO: Readonly<Record<LimitClass, { name: string; phrase: string; rule: string }>> = {
  device_command: {
    name: 'Per-device commands',
    phrase: 'the per-device command limit',
    rule: 'commands per minute to one device, your account’s `rate_limits.device_commands_per_min`, plus a global per-device ceiling shared by all partners',
  },
  config_mutation: {
    name: 'Configuration mutations',
    phrase: 'the configuration mutation throttle',
    rule: 'a separate per-partner throttle on configuration changes, by default 30 per minute',
  },
  destructive: {
    name: 'Destructive operations',
    phrase: 'the destructive-operation ceiling',
    rule: 'one per-partner per-hour ceiling shared by destructive system verbs, connection/identity settings writes, device removal and energy reset',
  },
};
