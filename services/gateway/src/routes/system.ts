import { commandTier, settingTier, SYSTEM_VERBS, tierPermission } from '@fleet/contracts';
import { nameText, TIME_RANGE_TEXT } from './schemas';
import type { ErrorSpec, JsonSchema, RouteDef, TierOf } from './types';

/**
 * Routes owned by system-files: the verb registry, system commands and settings, the response
 * feed, the status feed, platform files, file pushes and raw MQTT. Which permission a command
 * or a settings write needs, and whether it spends from the destructive ceiling, comes from the
 * verb registry in proto-schemas/system/registry.json (`@fleet/contracts`).
 */

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const dateTimeOrNull: JsonSchema = { type: ['string', 'null'], format: 'date-time' };
/** A date/time query parameter, as on every route: ISO 8601 or epoch seconds (the owning service parses it with the kit's parseTimeParam, one rule for system-files and the meter). */
const sinceParam: JsonSchema = { type: 'string', minLength: 1, description: `ISO 8601 date-time (no offset means UTC) or epoch seconds. Supported range ${TIME_RANGE_TEXT}.` };
const cursorParam: JsonSchema = { type: 'string', minLength: 1, maxLength: 512, pattern: '^[A-Za-z0-9_-]+$', description: 'The previous answer’s next_cursor.' };
const fileName: JsonSchema = {
  type: 'string',
  minLength: 1,
  maxLength: 64,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$',
  description: 'Letters, digits, `.`, `_` and `-`, starting with a letter or digit; at most 64 characters.',
  examples: ['chime.mp3'],
};
const dirSchema: JsonSchema = { type: 'string', enum: ['files', 'firmware'] };
// No type: on the destructive tier any value but the device id is 409 confirmation_required, never a 400.
const confirmField: JsonSchema = { description: 'Destructive tier only: must equal the device id exactly, a string (else 409 confirmation_required, nothing sent).' };

const publishFailed: ErrorSpec = { status: 503, code: 'publish_failed', when: 'The device broker could not take the message; nothing was sent.' };
const confirmationRequired: ErrorSpec = { status: 409, code: 'confirmation_required', when: 'A destructive command or setting without `confirm` equal to the device id; nothing was sent.' };
const encryptionUnavailable: ErrorSpec = {
  status: 409,
  code: 'encryption_unavailable',
  when: 'A secret setting cannot be sealed for this device (no settings key, or its firmware reported enc: false); nothing was sent, never in clear.',
};

const nullable = (type: string, extra: JsonSchema = {}): JsonSchema => ({ type: [type, 'null'], ...extra });
/** The audio check of an .mp3 in files/ (spec, Audio check). */
const audioCheck: JsonSchema = {
  type: 'object',
  required: ['playable', 'ideal', 'fixable', 'summary', 'issues'],
  description: 'The audio check of an .mp3 in files/. Best playback: mono MP3, 16 kHz, 48 kbps constant bitrate, no ID3 tags or cover art.',
  properties: {
    playable: { type: 'boolean', description: 'Holds MP3 audio a device can play.' },
    ideal: { type: 'boolean', description: 'No warnings.' },
    fixable: { type: 'boolean' },
    summary: {
      type: 'object',
      required: ['text', 'format', 'sample_rate_hz', 'channels', 'channel_mode', 'bitrate_kbps', 'vbr', 'duration_s', 'size_bytes', 'device_storage_pct', 'tag_bytes', 'cover_art', 'header_frame'],
      properties: {
        text: { type: 'string' },
        format: nullable('string'),
        sample_rate_hz: nullable('integer'),
        channels: nullable('integer'),
        channel_mode: { enum: ['stereo', 'joint_stereo', 'dual_channel', 'mono', null] },
        bitrate_kbps: nullable('integer', { description: 'Average.' }),
        vbr: { type: 'boolean' },
        duration_s: { type: 'number' },
        size_bytes: { type: 'integer' },
        device_storage_pct: { type: 'number', description: 'Of the about 9.75 MB all of a device’s sound files share.' },
        tag_bytes: { type: 'integer' },
        cover_art: { type: 'boolean' },
        header_frame: { enum: ['Xing', 'Info', 'VBRI', null] },
      },
    },
    issues: {
      type: 'array',
      description: 'Most serious first. Codes seen: not_mp3, not_layer3, too_big, large_file, stereo, high_sample_rate, high_bitrate, large_tags, uppercase_extension, low_sample_rate, long_clip; more may be added.',
      items: {
        type: 'object',
        required: ['code', 'severity', 'message'],
        properties: { code: { type: 'string' }, severity: { type: 'string', enum: ['error', 'warn', 'info'] }, message: { type: 'string' } },
      },
    },
  },
};

const ack: JsonSchema = {
  type: 'object',
  required: ['topic', 'payload', 'sent_at', 'command'],
  properties: {
    topic: { type: 'string', description: '`<root>/<device_id>/sys/exe`.' },
    payload: { type: 'string', description: 'The command line exactly as published; its acknowledgement is this followed by `>ok`, `>failed`, `>applied` or `>unknown`.' },
    sent_at: dateTime,
    command: { type: 'string' },
    key: { type: 'string', description: 'Settings writes: the key.' },
  },
};
/** A settings write's acknowledgement names its key too. */
const settingsAck: JsonSchema = { ...ack, required: ['key', 'topic', 'payload', 'sent_at', 'command'] };

const registryAnswer: JsonSchema = {
  type: 'object',
  required: ['commands', 'settings', 'destructive_settings_keys', 'secret_key_parts'],
  properties: {
    commands: {
      type: 'array',
      items: {
        type: 'object',
        required: ['command', 'tier', 'required_permission', 'confirm_required', 'allowed', 'products', 'params', 'description'],
        properties: {
          command: { type: 'string' },
          tier: { type: 'string', enum: ['control', 'destructive'] },
          required_permission: { type: 'string', enum: ['system_control', 'system_destructive'] },
          confirm_required: { type: 'boolean', description: 'The request must carry `confirm` equal to the device id.' },
          allowed: { type: 'boolean', description: 'Whether your account holds the tier’s permission (for `set`: the control tier; destructive keys need system_destructive).' },
          products: { type: 'array', items: { type: 'string', enum: ['light', 'meter'] } },
          params: {
            type: 'array',
            items: {
              type: 'object',
              required: ['name', 'type', 'required'],
              properties: { name: { type: 'string' }, type: { type: 'string' }, required: { type: 'boolean' }, description: { type: 'string' } },
            },
          },
          description: { type: 'string' },
        },
      },
    },
    elsewhere: {
      type: 'array',
      description: 'Verbs of the device protocol sent through their own routes (which track their tokens).',
      items: { type: 'object', properties: { command: { type: 'string' }, route: { type: 'string' }, products: { type: 'array', items: { type: 'string' } } } },
    },
    settings: {
      type: 'array',
      description: 'The settings catalog: every key PUT .../system/settings/{key} accepts.',
      items: {
        type: 'object',
        required: ['key', 'type', 'tier', 'secret', 'allowed'],
        properties: {
          key: { type: 'string' },
          type: { type: 'string', enum: ['string', 'integer'] },
          tier: { type: 'string', enum: ['control', 'destructive'] },
          secret: { type: 'boolean', description: 'Sent sealed (enc1:) and never in clear.' },
          allowed: { type: 'boolean' },
          min: { type: 'integer' },
          max: { type: 'integer' },
          min_length: { type: 'integer' },
          max_length: { type: 'integer' },
          length_unit: {
            type: 'string',
            enum: ['characters', 'bytes'],
            description: 'What min_length and max_length count: characters (Unicode code points) or bytes of the value’s UTF-8 encoding (e.g. wifiSsid: at most 32 bytes).',
          },
          pattern: { type: 'string' },
          enum: { type: 'array', items: { type: 'string' } },
          description: { type: 'string' },
        },
      },
    },
    destructive_settings_keys: { type: 'array', items: { type: 'string' } },
    secret_key_parts: { type: 'array', items: { type: 'string' }, description: 'A key containing one of these (any case) is a secret.' },
  },
};

const transfer: JsonSchema = {
  type: 'object',
  required: ['transfer_id', 'device_id', 'state', 'terminal', 'src', 'dest', 'sha256', 'attempts', 'detail', 'timeline', 'poll_after_s'],
  properties: {
    transfer_id: { type: 'string' },
    device_id: { type: 'string' },
    state: { type: 'string', enum: ['queued', 'sent', 'succeeded', 'failed', 'timed_out'] },
    terminal: { type: 'boolean', description: 'true means stop polling.' },
    src: { type: 'string', description: 'The platform file pushed (files/<name>).' },
    dest: { type: 'string', description: 'The name on the device.' },
    sha256: { type: 'string' },
    corr_mode: { type: 'string', enum: ['envelope', 'url_token'], description: 'How the acknowledgement is matched: `xfer=` in the command line (envelope) or the transfer id in the download URL (url_token).' },
    attempts: { type: 'integer' },
    detail: { type: ['string', 'null'], description: 'The device’s reply, or why the transfer failed or timed out.' },
    timeline: {
      type: 'object',
      required: ['created_at', 'sent_at', 'ack_deadline', 'settled_at'],
      properties: { created_at: dateTimeOrNull, sent_at: dateTimeOrNull, ack_deadline: dateTimeOrNull, settled_at: dateTimeOrNull },
    },
    note: { type: 'string', description: 'Present while sent.' },
    device_online: { type: 'boolean', description: 'Only on the POST answer.' },
    poll_after_s: { type: ['number', 'null'], description: 'Seconds before the next poll; null once terminal.' },
  },
};

const platformFile: JsonSchema = {
  type: 'object',
  required: ['dir', 'name', 'size', 'sha256'],
  properties: {
    dir: dirSchema,
    name: { type: 'string' },
    size: { type: 'integer' },
    sha256: { type: 'string' },
    modified_at: dateTime,
    audio: audioCheck,
  },
};

const rawRow: JsonSchema = {
  type: 'object',
  required: ['topic', 'payload', 'direction', 'received_at', 'qos', 'retain'],
  properties: {
    topic: { type: 'string' },
    payload: { type: 'string', description: 'UTF-8 text; bytes that are not UTF-8 are replaced.' },
    direction: { type: 'string', enum: ['in', 'out'], description: 'in: the device sent it; out: the platform sent it to the device.' },
    received_at: dateTime,
    qos: { type: 'integer' },
    retain: { type: 'boolean' },
  },
};

/** Both tiers may reach a tiered route; which one a request needs is decided from its body (tierOf). */
const eitherTier = ['system_control', 'system_destructive'] as const;

const commandTierOf: TierOf = ({ body }) => {
  const b = (body ?? {}) as { command?: unknown; params?: unknown };
  const tier = commandTier(b.command, b.params);
  return tier ? { permission: tierPermission(tier), destructive: tier === 'destructive' } : undefined;
};

const settingTierOf: TierOf = ({ params }) => {
  const tier = settingTier(params.key ?? '');
  return { permission: tierPermission(tier), destructive: tier === 'destructive' };
};

export const systemRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/v1/system/commands',
    operationId: 'listSystemCommands',
    tag: 'System',
    summary: 'The verb registry and the settings catalog',
    description: 'Every verb with its tier, parameters, whether confirm is needed and whether your account holds the tier; the settings catalog with each key’s type and range; the destructive settings keys.',
    permission: 'system_read',
    target: { subject: 'system.command.registry' },
    responses: { 200: { description: 'The registry', schema: registryAnswer } },
  },
  {
    method: 'POST',
    path: '/v1/devices/{device_id}/system/commands',
    operationId: 'sendSystemCommand',
    tag: 'System',
    summary: 'Send a system verb to a device',
    description:
      'Fire-and-forget: 202 means the broker took the exact line returned; poll the response feed for its acknowledgement. Control verbs need system_control; destructive ones ' +
      `(${SYSTEM_VERBS.filter((v) => v.tier === 'destructive').map((v) => v.command).join(', ')}, and \`set\` of a connection or identity key) need system_destructive, ` +
      '`confirm` equal to the device id, and spend from the per-hour destructive ceiling. `addfile`, `setcert` and `ota_update` name a platform file; the server adds its SHA-256 and a download URL.',
    permission: [...eitherTier],
    tierOf: commandTierOf,
    target: { subject: 'system.command.send' },
    device: {},
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['command'],
      examples: [{ command: 'query' }, { command: 'set', params: { key: 'volume', value: 40 } }],
      properties: {
        command: { type: 'string', minLength: 1, maxLength: 32, description: 'A verb of GET /v1/system/commands.' },
        params: { type: 'object', description: 'The verb’s parameters (GET /v1/system/commands).' },
        confirm: confirmField,
      },
    },
    limits: ['device_command'],
    responses: { 202: { description: 'Published', schema: ack } },
    errors: [{ status: 400, code: 'validation_error', when: 'An unknown verb, a verb the product does not run, a missing or invalid parameter, a file not in the platform files.' }, confirmationRequired, encryptionUnavailable, publishFailed],
  },
  {
    method: 'GET',
    path: '/v1/devices/{device_id}/system/settings',
    operationId: 'getSystemSettings',
    tag: 'System',
    summary: 'The settings the device last reported',
    description: 'From the device’s last `sys/settings` (after every connect and after `query`), with `fw_ver` and `file_list`; values the firmware masks are `*****`. Until the device reports for the first time the cache is empty: `settings` `{}`, `fw_ver` null, `file_list` empty and `received_at` null.',
    permission: 'system_read',
    target: { subject: 'system.settings.get' },
    device: {},
    responses: {
      200: {
        description: 'The cached settings',
        schema: {
          type: 'object',
          required: ['device_id', 'settings', 'fw_ver', 'file_list', 'received_at'],
          properties: {
            device_id: { type: 'string' },
            settings: { type: 'object', description: 'Every key the device reported.' },
            fw_ver: { type: ['string', 'null'] },
            file_list: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' }, size: { type: 'integer' } } } },
            received_at: { ...dateTimeOrNull, description: 'When the device reported these settings; null until it first does.' },
          },
        },
      },
    },
  },
  {
    method: 'PUT',
    path: '/v1/devices/{device_id}/system/settings/{key}',
    operationId: 'writeSystemSetting',
    tag: 'System',
    summary: 'Write one setting (applies at the next reboot)',
    description:
      'The key must be in the settings catalog (GET /v1/system/commands), the value of its type and range. Connection and identity keys need system_destructive and `confirm`. ' +
      'A secret key (containing pass, pwd, key, token, secret or psk) is sealed for the device (`enc1:`): match its acknowledgement against the returned payload.',
    permission: [...eitherTier],
    tierOf: settingTierOf,
    target: { subject: 'system.settings.put' },
    device: {},
    params: { key: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.-]+$', examples: ['volume'] } },
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['value'],
      examples: [{ value: 40 }],
      properties: { value: { type: ['string', 'integer', 'boolean'], description: 'Of the key’s type.' }, confirm: confirmField },
    },
    limits: ['device_command'],
    responses: { 202: { description: 'Published', schema: settingsAck } },
    errors: [{ status: 400, code: 'validation_error', when: 'A key outside the catalog, or a value not of its type or range.' }, confirmationRequired, encryptionUnavailable, publishFailed],
  },
  {
    method: 'GET',
    path: '/v1/devices/{device_id}/system/responses',
    operationId: 'listSystemResponses',
    tag: 'System',
    summary: 'The response feed: acknowledgements and log lines',
    description:
      'Oldest first. Without cursor or since: the last ten minutes. `next_cursor` is always set: keep the latest and pass it back; a cursor never skips a row. ' +
      '`since` with `server_now` paging can skip rows when more arrive than a page holds.',
    permission: 'system_read',
    target: { subject: 'system.response.list' },
    device: {},
    query: { properties: { cursor: cursorParam, since: sinceParam, limit: { type: 'integer', minimum: 1, maximum: 1000, description: 'Rows per page (default 200).' } } },
    responses: {
      200: {
        description: 'A page of the feed',
        schema: {
          type: 'object',
          required: ['rows', 'has_more', 'next_cursor', 'server_now'],
          properties: {
            rows: {
              type: 'array',
              items: {
                type: 'object',
                required: ['kind', 'line', 'received_at'],
                properties: {
                  kind: { type: 'string', enum: ['ack', 'log', 'other'] },
                  line: { type: 'string', description: 'The line as the device sent it.' },
                  command: { type: ['string', 'null'], description: 'ack: the acknowledged line (your payload).' },
                  result: { type: ['string', 'null'], enum: ['ok', 'failed', 'applied', 'unknown', 'duplicate', null] },
                  reason: { type: ['string', 'null'], description: 'ack: what followed `failed:`.' },
                  text: { type: ['string', 'null'], description: 'log: the text after `log>`.' },
                  received_at: dateTime,
                },
              },
            },
            has_more: { type: 'boolean' },
            next_cursor: { type: 'string' },
            server_now: dateTime,
          },
        },
      },
    },
  },
  {
    method: 'GET',
    path: '/v1/devices/{device_id}/system/status',
    operationId: 'getSystemStatus',
    tag: 'System',
    summary: 'The status feed: connectivity, last connection string, snapshots, heartbeats',
    description: 'Connectivity from the registry; the last `status` payload the device published (online/offline) and when; its recent telemetry snapshots and heartbeats (newest first), as long as DEVICE_IN keeps them.',
    permission: 'system_read',
    target: { subject: 'system.status.get' },
    device: {},
    query: { properties: { limit: { type: 'integer', minimum: 1, maximum: 500, description: 'Snapshots and heartbeats each (default 20).' } } },
    responses: { 200: { description: 'The status feed', schema: { type: 'object' } } },
  },
  {
    method: 'POST',
    path: '/v1/system/files',
    operationId: 'uploadPlatformFile',
    tag: 'System',
    summary: 'Upload a platform file (multipart)',
    description:
      'multipart/form-data with a `dir` field (`files` or `firmware`, sent before the file) and a `file` part. At most 32 MB (larger is 413, without the rest being read). ' +
      '`firmware/` takes `.bin` only; `files/` takes .mp3, .wav, .pem, .crt, .cer, .der, .txt and .json. A name that exists is 409 conflict (never overwritten). ' +
      'An .mp3 in files/ gets the audio check; one that holds no MPEG Layer III audio is 400. Idempotency-Key is not accepted. ' +
      'There is no route of one platform file: `Location` is the file list filtered to the new file, `/v1/system/files?dir=<dir>&name=<name>`, whose GET answers `{files: [the file]}`.',
    permission: 'file_upload',
    target: { upload: 'system.upload.open' },
    responses: { 201: { description: 'Stored; Location is GET /v1/system/files?dir=<dir>&name=<name>', headers: ['Location'], schema: platformFile } },
    errors: [
      { status: 400, code: 'validation_error', when: 'No file or dir, a bad name or extension, an .mp3 with no MP3 audio.' },
      { status: 409, code: 'conflict', when: 'A file of that name exists in that directory.' },
      { status: 413, code: 'payload_too_large', when: 'The file is over 32 MB.' },
      { status: 415, code: 'unsupported_media_type', when: 'The body is not multipart/form-data.' },
    ],
  },
  {
    method: 'GET',
    path: '/v1/system/files',
    operationId: 'listPlatformFiles',
    tag: 'System',
    summary: 'Platform files with size and modified time',
    description: '`dir` keeps one directory; `name` keeps the file of that exact name (an empty list when there is none). An upload’s `Location` is this list filtered by both.',
    permission: 'system_read',
    target: { subject: 'system.file.list' },
    query: { properties: { dir: dirSchema, name: { ...fileName, description: 'Only the file of this exact name. ' + String(fileName.description) } } },
    responses: { 200: { description: 'The files', schema: { type: 'object', required: ['files'], properties: { files: { type: 'array', items: platformFile } } } } },
  },
  {
    method: 'DELETE',
    path: '/v1/system/files',
    operationId: 'deletePlatformFile',
    tag: 'System',
    summary: 'Delete a platform file',
    permission: 'file_delete',
    target: { subject: 'system.file.delete' },
    query: { properties: { dir: dirSchema, name: fileName }, required: ['dir', 'name'] },
    responses: { 204: { description: 'Deleted' } },
    errors: [
      { status: 403, code: 'forbidden', when: 'A protected name.' },
      { status: 404, code: 'not_found', when: 'No such file.' },
    ],
  },
  {
    method: 'POST',
    path: '/v1/devices/{device_id}/files',
    operationId: 'pushFile',
    tag: 'System',
    summary: 'Push a platform file to a device',
    description:
      '`name` is an .mp3 in files/; `dest` (default name) is its name on the device, an .mp3 name too. Poll the Location every `poll_after_s` until `terminal`. A key is remembered as long as the transfer ' +
      'exists: after 24 hours the same request answers 200 with the current state.',
    permission: 'system_control',
    target: { subject: 'system.transfer.create' },
    device: {},
    body: { type: 'object', additionalProperties: false, required: ['name'], examples: [{ name: 'chime.mp3' }], properties: { name: fileName, dest: fileName } },
    idempotent: true,
    limits: ['device_command'],
    responses: {
      200: { description: 'A known Idempotency-Key past 24 hours: the transfer now', schema: transfer },
      202: { description: 'The transfer', headers: ['Location'], schema: transfer },
    },
    errors: [{ status: 400, code: 'validation_error', when: '`name` or `dest` not an .mp3 name, or no such file in files/; final, nothing was published.' }, publishFailed],
  },
  {
    method: 'GET',
    path: '/v1/devices/{device_id}/files',
    operationId: 'listTransfers',
    tag: 'System',
    summary: 'A device’s file transfers, newest first',
    permission: 'system_read',
    target: { subject: 'system.transfer.list' },
    device: {},
    query: {
      properties: {
        state: { type: 'string', enum: ['queued', 'sent', 'succeeded', 'failed', 'timed_out'] },
        since: { ...sinceParam, description: 'Transfers created at or after this.' },
        limit: { type: 'integer', minimum: 1, maximum: 200, description: 'Default 50.' },
      },
    },
    responses: { 200: { description: 'The transfers', schema: { type: 'object', required: ['transfers'], properties: { transfers: { type: 'array', items: transfer } } } } },
  },
  {
    method: 'GET',
    path: '/v1/devices/{device_id}/files/{transfer_id}',
    operationId: 'getTransfer',
    tag: 'System',
    summary: 'One file transfer (the document to poll)',
    permission: 'system_read',
    target: { subject: 'system.transfer.get' },
    device: {},
    params: { transfer_id: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' } },
    responses: { 200: { description: 'The transfer', schema: transfer } },
    errors: [{ status: 404, code: 'not_found', when: 'No such transfer for this device.' }],
  },
  {
    method: 'POST',
    path: '/v1/system/mqtt/messages',
    operationId: 'publishRawMqtt',
    tag: 'System',
    summary: 'Publish a raw MQTT message (internal)',
    description:
      'Sent as written, without settings checks, except on a topic ending in `sys/exe` (any root, bare `sys/exe` included), where the payload is one command line: ' +
      '`set>` of a secret key (containing pass, pwd, key, token, secret or psk) is always sealed (`enc1:`) for the device the topic names, even when its value already starts with `enc1:`; ' +
      'when the topic is not `<root>/<device id>/sys/exe` of a known root and a 12-upper-case-hex id, or the device has no settings key or reported `enc: false`, it is 409 encryption_unavailable and nothing is sent. ' +
      'A secret key in a line that reads as a set but is not the protocol’s (`SET>wifiPass=…`, blanks around the verb) or after another pair of a `set>` is 400, and so are control characters (U+0000–U+001F, U+007F) anywhere in a `sys/exe` line outside a sealed value. ' +
      'On every other topic the payload is any text (only U+0000 and lone surrogates are refused, as in every request). QoS defaults to 2 on `.../sys/exe` (and other `sys/` topics), else 1. ' +
      'raw_mqtt_devices: only under `<root>/<in-scope device id>/`; raw_mqtt_global: any topic without wildcards.',
    permission: ['raw_mqtt_global', 'raw_mqtt_devices'],
    target: { subject: 'system.mqtt.publish' },
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['topic', 'payload'],
      properties: {
        topic: nameText({ minLength: 1, maxLength: 512, description: 'No + or # wildcards.' }),
        payload: {
          type: 'string',
          maxLength: 262144,
          description: 'Any text, control characters included (not U+0000); on a `sys/exe` topic one command line, without control characters outside a secret value.',
        },
        retain: { type: 'boolean' },
        qos: { type: 'integer', enum: [0, 1, 2] },
      },
    },
    responses: { 202: { description: 'Published', schema: { type: 'object', required: ['topic', 'payload', 'sent_at'], properties: { topic: { type: 'string' }, payload: { type: 'string' }, sent_at: dateTime, qos: { type: 'integer' }, retain: { type: 'boolean' } } } } },
    errors: [
      {
        status: 400,
        code: 'validation_error',
        when: 'A wildcard in the topic; on `sys/exe`: control characters in the line, a secret key in a line that is not the protocol’s `set>key=value`, or a secret pair after another one.',
      },
      { status: 403, code: 'forbidden', when: 'raw_mqtt_devices: a topic outside every in-scope device (raw_mqtt_global would allow it).', liftedBy: 'raw_mqtt_global' },
      {
        status: 409,
        code: 'encryption_unavailable',
        when: 'A secret `set>` on a `sys/exe` topic that names no device (`<root>/<device id>/sys/exe`), or whose device has no settings key or reported enc: false; nothing was sent, never in clear.',
      },
      publishFailed,
    ],
  },
  {
    method: 'GET',
    path: '/v1/system/mqtt/messages',
    operationId: 'readRawMqtt',
    tag: 'System',
    summary: 'Read captured MQTT traffic (internal)',
    description:
      'Messages devices sent and messages sent to them, as kept in DEVICE_IN (72 hours by default). The first call returns the newest rows, newest first; its `next_cursor` then follows what ' +
      'arrives after, oldest first, with `has_more`. `since` lists rows at or after it, oldest first. raw_mqtt_devices: the filter must sit under one in-scope device’s subtree.',
    permission: ['raw_mqtt_global', 'raw_mqtt_devices'],
    target: { subject: 'system.mqtt.read' },
    query: {
      properties: {
        topic: nameText({ minLength: 1, maxLength: 512, description: 'A topic filter; + matches one level, # the rest.' }),
        limit: { type: 'integer', minimum: 1, maximum: 1000, description: 'Default 100.' },
        cursor: cursorParam,
        since: sinceParam,
      },
      required: ['topic'],
    },
    responses: {
      200: {
        description: 'Rows',
        schema: { type: 'object', required: ['rows', 'has_more', 'next_cursor'], properties: { rows: { type: 'array', items: rawRow }, has_more: { type: 'boolean' }, next_cursor: { type: 'string' }, server_now: dateTime } },
      },
    },
    errors: [
      { status: 400, code: 'validation_error', when: 'A filter that is not valid, a cursor of another filter, or (raw_mqtt_devices) a filter that spans devices.' },
      { status: 403, code: 'forbidden', when: 'raw_mqtt_devices: a filter under a device outside the key’s scope (raw_mqtt_global would allow it).', liftedBy: 'raw_mqtt_global' },
    ],
  },
];
