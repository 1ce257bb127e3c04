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
      'Meter interval records always carry an integer `seq` and an 8-hex `sid`: a payload a meter sent without a usable `sid` and `seq` (not JSON, or no identity) is no interval record and is not listed in either mode (it was listed quarantined with `seq` and `sid` null).',
      'Energy reset (`POST /v1/meter/devices/{device_id}/resetenergy`): a missing `confirm` (body `{}`, or no body at all) is 409 `confirmation_required`, as a mismatched one is (it was 400 `validation_error`).',
      'Devices removed and provisioned again under the same id start `disconnected` with null `status_changed_at` and `last_seen_at` until the new device itself sends something; nothing the removed device sent carries over (status, timestamps, health telemetry, live-reading checks).',
      'System interface: the verb registry and settings catalog (`GET /v1/system/commands`), system verbs (`POST /v1/devices/{device_id}/system/commands`) and settings writes (`PUT .../system/settings/{key}`) with their tiers and `confirm`, secret settings sealed for the device (`enc1:`), the cached settings, the response feed and the status feed (`GET .../system/status`).',
      'Platform files: multipart upload with an audio check for .mp3 (`POST /v1/system/files`), list (`GET /v1/system/files`) and delete (`DELETE /v1/system/files?dir=&name=`).',
      'File push: `POST /v1/devices/{device_id}/files` creates a transfer to poll at `GET /v1/devices/{device_id}/files/{transfer_id}`; `GET /v1/devices/{device_id}/files` lists a device’s transfers.',
      'Raw MQTT for internal keys: `POST` and `GET /v1/system/mqtt/messages`.',
      'Platform files: `GET /v1/system/files` takes `name` (the file of that exact name); an upload’s `Location`, `/v1/system/files?dir=<dir>&name=<name>`, is that filtered list and answers `{files: [the file]}`.',
      'Raw MQTT publish to a topic ending in `sys/exe`: a secret `set>` is always sealed, a value already starting with `enc1:` included; one on a topic that names no device (`<root>/<device id>/sys/exe`) is 409 `encryption_unavailable`; a secret key in a line that is not the protocol’s `set>key=value` (`SET>…`), and control characters in a `sys/exe` line, are 400 `validation_error`; nothing is ever sent in clear. On other topics the payload may hold control characters.',
      'Settings catalog (`GET /v1/system/commands`): `length_unit` says what `min_length` and `max_length` count; `wifiSsid` takes at most 32 bytes of UTF-8, as described.',
      'File push: `dest` must be an .mp3 name too, else 400 `validation_error` with nothing published.',
      '`since` of `GET /v1/devices/{device_id}/system/responses`, `GET /v1/devices/{device_id}/files` and `GET /v1/system/mqtt/messages` takes epoch seconds as well as ISO 8601, like every date/time query parameter.',
      'A removed device’s system state (cached settings, response feed, file transfers, status feed history) is forgotten: a device provisioned again under the same id starts clean.',
      'Push events: webhook endpoints signed the Standard Webhooks way (`/v1/webhooks`: create, list, update, delete, rotate the secret with an overlap, test, delivery log and redeliver; permission `webhook_manage`) and the live stream of Server-Sent Events with resume by `Last-Event-ID` (`GET /v1/events`; permission `events_read`); every event type, its data and the permission to receive it in the `webhooks` section of the OpenAPI document.',
      'Push events: you receive an event when its device was in your scope at the time of the event, on the live stream too, also when you resume with `Last-Event-ID` long after: an event from before a device moved is replayed to the partners of the node it was in then, not of the node it is in now. What you may receive is judged by the permissions and organization grants you hold when the event is sent to you (live, or at the time of the replay).',
      'Webhooks: `delivered_at` is when your endpoint answered; a rotation with `previous_expires_in_s: 0` answers `previous_secret_expires_at: null`; a delivery log `cursor` is valid only for the endpoint whose log gave it (another endpoint’s is `400 validation_error`).',
      'Webhooks: `POST /v1/webhooks/{webhook_id}/test` on a disabled endpoint is refused with `409 webhook_disabled` (nothing is queued); while an endpoint is disabled its pending deliveries are held (`state: pending`, `next_attempt_at: null`) and they are sent as soon as it is enabled again.',
      'Webhook receivers on link-local (`169.254.0.0/16`, `fe80::/10`) or unspecified (`0.0.0.0`, `::`) addresses are refused with `400 validation_error`, in a local development fleet too (which otherwise also takes plain `http` and loopback or private receivers).',
      'Live stream: an open `GET /v1/events` ends when the key that opened it is revoked, its account disabled or `events_read` withdrawn (at once, and checked every 5 seconds); reconnecting is then refused.',
      'A request refused before its body is read (a `Content-Encoding`, a body over 1 MB, a header sent twice, a query string that is not UTF-8) still counts against a valid key and carries `RateLimit-*`; a full window answers 429 first.',
      'Device configuration (`GET /v1/devices/{device_id}/config`): `org_node.parent_id` is null when the parent lies outside your scope, as in `GET /v1/org-tree`.',
      'The live stream answers `Cache-Control: no-store`, as every `/v1` response does (it was `no-cache`).',
      'A `types` value the live stream cannot take is 400 `validation_error` saying what it takes (event types of the catalog, comma-separated without spaces) instead of quoting a pattern.',
      'Every date/time query parameter (`start`, `end` and `received_since` of the meter routes, `since` of the system routes) follows one rule: epoch seconds (up to six decimals), or an ISO 8601 calendar date alone (its midnight) or with a time (fractions allowed) and an optional offset (`Z`, `±hh` or `±hh:mm`; none means UTC), all in the extended form (`2026-11-25T10:00:00Z`, also with an offset written `±hhmm`) or all in the basic one (`20261125T100000Z`); a year past 9999 (`+010000-01-01`) is outside the supported range. The meter routes now refuse, as the system routes did, week dates (`2026-W48-4`), ordinal dates (`2026-330`), a year and month alone (`2026-11`), a time without a date, lower-case `t` or `z`, a basic date with an extended time (`20261125T10:00:00Z`) and offsets beyond 23:59: 400 `validation_error`.',
      'JSON answers of 8 KB or more (a page of meter records, long energy series) come gzip-compressed when your request’s `Accept-Encoding` prefers `gzip` to `identity`, with `Content-Encoding: gzip` and `Vary: Accept-Encoding`; a client that does not ask gets them uncompressed, as before.',
      'The description document gives a request example for provisioning, raw commands, predefined effects, system verbs, settings writes (with an example key), file pushes and alert profiles, each one valid for its route.',
      'Permissions come first on every route, as described: a request without the permission it needs is 403 `forbidden` even when its `Idempotency-Key` is malformed or was used with another request (only a replay is answered without the check), and on the two tiered system routes even when its body would be refused; the 403 names the permission the request’s own tier needs (`system_destructive` for a destructive verb or a connection/identity key, `system_control` otherwise).',
      'A device id that is not 12 uppercase hexadecimal characters is 404 `not_found` on every route of an existing device, as an unknown device is (the live reading request read, a settings write and a transfer read answered 400 `validation_error`); provisioning still answers 400 for it.',
      'A profile or signal id that names no row of yours is 404 `not_found` whatever integer it is: in the path of `PUT`/`DELETE /v1/profiles/{profile_id}` and `/v1/alert-signals/{signal_id}` (0, negative or past 2147483647 were 400) and as `profile_id` or `alert_signal_id` in a body (0 or negative were 400).',
      '`GET /v1/devices/{device_id}/system/settings` answers 200 with an empty cache (`settings` `{}`, `fw_ver` null, `file_list` `[]`, `received_at` null) for a device that has not reported its settings yet (it was 404 `not_found`, the answer of a device that does not exist).',
      'Response feed: the `next_cursor` of an empty page never passes a line that arrives while the page is read.',
      'File push: repeating a request with a key older than 24 hours (answered 200 with the transfer’s current state, nothing sent) spends nothing from the device command limit, as a replay does not.',
      'A meter that answers a live reading request or an energy reset with `unknown` (its firmware does not know the verb) ends it at once: `failed` with reason `unsupported` (a reset keeps `result: unknown`), where the live reading waited for `no_reply` and the reset stayed `pending`.',
      'A request that did its work answers what it did even when its answer cannot be kept for its `Idempotency-Key` (a store failure at that moment): never 503 with the work done; the key stays taken for a minute (`409 idempotency_in_progress`), so a retry then does not repeat the work.',
      'Two `Authorization` headers are a malformed key, 401 `unauthorized` (they were 400 `validation_error`); a 401 carries `error="invalid_token"` only when a bearer key was sent, not for another scheme such as `Basic` or a `Bearer` with nothing after it (RFC 6750 §3.1).',
      'A 405 `method_not_allowed` lists `HEAD` in `Allow` wherever `GET` is; the documents (`/openapi.json`, `/docs`, `/docs_adv`, `/changelog`) answer another method with 405 and `Allow: GET, HEAD` (it was 404 `unknown_route`).',
      'The error table names every code the service sends: an upload over 32 MB is 413 `payload_too_large` (as a JSON body over 1 MB is), 408 `request_timeout`, and 503 `broker_unavailable` from provisioning and removal.',
      'A `confirm` that is not a string (a number, `null`, `true`) is mismatched: 409 `confirmation_required` on device removal, energy reset and destructive system commands and settings (it was 400 `validation_error`).',
      'The webhook delivery log (`GET /v1/webhooks/{webhook_id}/deliveries`) answers `has_more` beside `next_cursor`, as every paged list does.',
      'A request refused before its body is read (a `Content-Encoding`, a body over 1 MB, a header sent twice, a query string that is not UTF-8) is 403 `forbidden` with `required_permission` when your key lacks the route’s permission, as every other request is.',
      'Alert profiles: a rule with an empty `all` is accepted and always holds (it was 400); a condition with `is_null` or `not_null` may carry any `value`, which is ignored (it was 400 unless null).',
      'Sensors: `PUT`/`DELETE /v1/devices/{device_id}/sensors/{tdl_id}` with a path id that cannot be a sensor id is 404 `not_found`, as a sensor not attached is (it was 400); attaching a sensor already attached is 409 `already_attached` whatever `profile_id` the repeat names.',
      'A sensor silent for more than two days stays `STALE_DATA`; it no longer turns into `INSUFFICENT_DATA` when its older readings are dropped.',
      'Meter summary: a window is at most one calendar year (`end` no later than `start` plus one year, UTC); 366 days without a leap day is 400 `validation_error` (it was accepted).',
      'Meter records: `flags.energy_reset` (and the energy answers’ resets) also catches a counter that went backwards across records that read no counter: the new reading is compared with the stream’s last reading before it.',
      'Predefined effects: `sound_play` takes whole numbers only for `volume` and `count`, as its `step` of 1 says; `volume: 50.0000001` is 400 `validation_error` naming `params.volume` (it was sent to the device as written).',
      'A light channel your account may not command is 403 `forbidden` before the rest of the request, as a missing permission is: a raw command or effect on such a channel is refused so whatever its body, device or limits (it was 400 for a body wrong otherwise, 404 for a device out of scope).',
      'File push: a transfer whose push stopped on the platform before it knew whether the broker took it (a restart at that moment) ends `timed_out`, telling you to check `file_list`; it was `failed`, which is for a failure the device reports.',
      '`device.moved` names a node only where you can see it: the node the device left or reached outside your scope is `null` (it named nodes beyond your grants, which `GET /v1/org-tree` never shows).',
      'Machine-readable description at `/openapi.json` (OpenAPI 3.1, document version 1.0.0), the quick-start guide at `/docs`, the full reference at `/docs_adv` and this changelog.',
    ],
  },
];
