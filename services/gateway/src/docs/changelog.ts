/** One release of the partner API, newest first in CHANGELOG. */
export interface ChangelogEntry {
  /** The description document version (semver). */
  version: string;
  /** Release date, YYYY-MM-DD. */
  date: string;
  /** One line per change, written for partners; `backticks` render as code. */
  changes: readonly string[];
}

/** Every release, newest first. Rendered at /changelog. */
export const CHANGELOG: readonly ChangelogEntry[] = [
  {
    version: '1.0.0',
    date: '2026-11-22',
    changes: [
      'Gateway foundation: every route is under `/v1` and served over HTTPS.',
      'Authentication with bearer API keys issued by service staff (`Authorization: Bearer <API_KEY>`); 401 `unauthorized` carries `WWW-Authenticate`.',
      'Independent per-partner permissions, checked before anything else; a missing permission is 403 `forbidden` with `required_permission`.',
      'Rate limits: a per-partner request limit reported in `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`, plus limits for device commands, configuration mutations and destructive operations; 429 `rate_limited` carries `Retry-After`.',
      'Idempotency: routes that accept `Idempotency-Key` replay the first 2xx response for 24 hours with `Idempotent-Replayed: true`.',
      'Account route `GET /v1/account`: partner name, key prefix, permissions, allowed channels and rate limits.',
      'Devices: list and read devices in scope, provision (`POST /v1/devices/{device_id}`, three credential sources) and remove them, device health, the organization tree, rename, organization moves and the light automation switch.',
      'Light commands: the predefined command catalog (`GET /v1/commands`: the whole catalog for a key with `predefined_commands`, as staff may have narrowed it for the account), raw commands, predefined effects per channel and the last reported state of each channel.',
      'Meter data under `/v1/meter`: interval records by start time or by arrival, summaries, energy per hour or day in any IANA time zone, interval reports, live readings and energy counter resets.',
      'System interface: the verb registry and settings catalog (`GET /v1/system/commands`), system verbs (`POST /v1/devices/{device_id}/system/commands`) and settings writes (`PUT .../system/settings/{key}`) with their tiers and `confirm`, secret settings sealed for the device (`enc1:`), the cached settings, the response feed and the status feed (`GET .../system/status`).',
      'Platform files: multipart upload with an audio check for .mp3 (`POST /v1/system/files`), list (`GET /v1/system/files`) and delete (`DELETE /v1/system/files?dir=&name=`).',
      'File push: `POST /v1/devices/{device_id}/files` creates a transfer to poll at `GET /v1/devices/{device_id}/files/{transfer_id}`; `GET /v1/devices/{device_id}/files` lists a device’s transfers.',
      'Raw MQTT for internal keys: `POST` and `GET /v1/system/mqtt/messages`.',
      'Push events: webhook endpoints signed the Standard Webhooks way (`/v1/webhooks`: create, list, update, delete, rotate the secret with an overlap, test, delivery log and redeliver; permission `webhook_manage`) and the live stream of Server-Sent Events with resume by `Last-Event-ID` (`GET /v1/events`; permission `events_read`); every event type, its data and the permission to receive it in the `webhooks` section of the OpenAPI document.',
      'Machine-readable description at `/openapi.json` (OpenAPI 3.1, document version 1.0.0), the quick-start guide at `/docs`, the full reference at `/docs_adv` and this changelog.',
    ],
  },
];
