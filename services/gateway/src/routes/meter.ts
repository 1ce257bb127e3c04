import { nameText, TIME_RANGE_TEXT } from './schemas';
import type { JsonSchema, RouteDef } from './types';

/** Routes owned by the meter service: interval records, summary, energy, report, live reading, energy reset. */

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const dateTimeOrNull: JsonSchema = { type: ['string', 'null'], format: 'date-time' };
const timeParam = (what: string): JsonSchema => ({
  type: 'string',
  description: `${what} ISO 8601 date-time (no offset means UTC) or epoch seconds. Supported range ${TIME_RANGE_TEXT}.`,
});
// No length bound: a token of any length that was not issued for the device is 404, as the spec says.
const tokenParam: JsonSchema = { type: 'string', minLength: 1, description: 'The token of the 202 answer; a token not issued for this device is 404.' };
const meter = { product: 'meter' as const };

const stat: JsonSchema = {
  type: ['object', 'null'],
  required: ['avg', 'min', 'max'],
  properties: { avg: { type: 'number' }, min: { type: 'number' }, max: { type: 'number' } },
  description: 'Rounded to 6 decimals; null when the record has no reading (quarantined, or reads.n = 0).',
};

const intervalRecord: JsonSchema = {
  type: 'object',
  required: ['seq', 'sid', 'start_at', 'time_quality', 'duration_s', 'reads', 'flags', 'quarantined', 'quarantine_reason', 'received_at'],
  properties: {
    seq: { type: 'integer', description: 'Counts from 0 within the stream. A payload without a usable sid and seq is no interval record and is never listed.' },
    sid: { type: 'string', pattern: '^[0-9a-f]{8}$', description: 'Stream id, 8 hex characters; new after every meter restart.' },
    start_at: { ...dateTimeOrNull, description: 'null when time_quality is unknown.' },
    time_quality: { type: 'string', enum: ['device', 'derived', 'unknown'] },
    duration_s: { type: ['integer', 'null'] },
    reads: { type: 'object', properties: { n: { type: ['integer', 'null'] }, err: { type: ['integer', 'null'] } } },
    voltage_v: stat,
    current_a: { ...stat, description: 'Divided by ct_turns.' },
    power_w: { ...stat, description: 'Divided by ct_turns.' },
    frequency_hz: stat,
    power_factor: stat,
    energy_wh: {
      type: ['object', 'null'],
      properties: { first: { type: ['number', 'null'] }, last: { type: ['number', 'null'] } },
      description: 'Lifetime counter at the first and last good read, divided by ct_turns.',
    },
    ct_turns: { type: ['integer', 'null'], description: '1 when the record omitted it; null on a quarantined record with an unusable value.' },
    alarm_reads: { type: ['integer', 'null'] },
    flags: {
      type: 'object',
      properties: { partial: { type: 'boolean' }, energy_reset: { type: 'boolean' }, meter_reconfigured: { type: 'boolean' } },
    },
    quarantined: { type: 'boolean' },
    quarantine_reason: {
      type: ['string', 'null'],
      description:
        'Why the record is not trusted: malformed_fields, unusable_ct_turns, invalid_clock, impossible_values, reads_exceed_duration, start_in_future (more may be added). A payload with no usable `sid` and `seq` is no interval record and is never listed.',
    },
    received_at: dateTime,
  },
};

const windowSchema: JsonSchema = { type: 'object', required: ['start', 'end'], properties: { start: dateTime, end: dateTime }, description: 'Half-open [start, end).' };

const intervalsAnswer: JsonSchema = {
  type: 'object',
  required: ['device_id', 'records', 'has_more', 'next_cursor'],
  properties: {
    device_id: { type: 'string' },
    unknown_time: { type: 'boolean', description: 'By start time only.' },
    window: { ...windowSchema, description: 'By start time only.' },
    mode: { type: 'string', enum: ['received'], description: 'By arrival only.' },
    received_since: { ...dateTimeOrNull, description: 'By arrival only; null on a cursor call.' },
    records: { type: 'array', items: intervalRecord },
    has_more: { type: 'boolean' },
    next_cursor: {
      type: ['string', 'null'],
      description: 'By start time: null on the last page. By arrival: never null; the bookmark to keep.',
    },
  },
};

const quantitySummary: JsonSchema = {
  type: ['object', 'null'],
  required: ['avg', 'min', 'max', 'intervals', 'seconds'],
  properties: { avg: { type: 'number' }, min: { type: 'number' }, max: { type: 'number' }, intervals: { type: 'integer' }, seconds: { type: 'integer' } },
};

const summaryAnswer: JsonSchema = {
  type: 'object',
  required: ['device_id', 'window', 'coverage', 'voltage_v', 'current_a', 'power_w', 'frequency_hz', 'power_factor', 'energy_wh'],
  properties: {
    device_id: { type: 'string' },
    window: windowSchema,
    coverage: {
      type: 'object',
      required: ['records', 'quarantined', 'seconds'],
      properties: { records: { type: 'integer' }, quarantined: { type: 'integer' }, seconds: { type: 'integer' } },
    },
    voltage_v: quantitySummary,
    current_a: quantitySummary,
    power_w: quantitySummary,
    frequency_hz: quantitySummary,
    power_factor: { ...quantitySummary, description: 'Only records with a load: power_w.max x ct_turns reached 5 W.' },
    energy_wh: {
      type: ['object', 'null'],
      required: ['total', 'resets', 'intervals'],
      properties: { total: { type: 'number' }, resets: { type: 'integer' }, intervals: { type: 'integer' } },
      description: "Equals the energy route's total for the same window; null with no counter reading.",
    },
  },
};

const energyAnswer: JsonSchema = {
  type: 'object',
  required: ['device_id', 'bucket', 'window', 'points', 'total'],
  properties: {
    device_id: { type: 'string' },
    bucket: { type: 'string', enum: ['hour', 'day'] },
    window: windowSchema,
    points: {
      type: 'array',
      items: {
        type: 'object',
        required: ['start_at', 'energy_wh', 'reset'],
        properties: {
          start_at: { type: 'string', description: 'Bucket start written in the zone with its offset.' },
          energy_wh: { type: ['number', 'null'], description: 'null when no record in the bucket carried a counter reading.' },
          reset: { type: 'boolean' },
        },
      },
    },
    total: {
      type: ['object', 'null'],
      required: ['energy_wh', 'resets', 'intervals', 'buckets'],
      properties: { energy_wh: { type: 'number' }, resets: { type: 'integer' }, intervals: { type: 'integer' }, buckets: { type: 'integer' } },
      description: 'null, not zero, when no record carried a counter reading.',
    },
    tz: { type: 'string', description: 'Echoed when sent.' },
  },
};

const commandAck: JsonSchema = {
  type: 'object',
  required: ['topic', 'payload', 'sent_at', 'command'],
  properties: { topic: { type: 'string' }, payload: { type: 'string' }, sent_at: dateTime, command: { type: 'string' } },
};

const liveReading: JsonSchema = {
  type: ['object', 'null'],
  properties: {
    link: { type: 'string', enum: ['ok', 'timeout', 'crc', 'exception', 'badreply', 'notstarted', 'unknown'] },
    answered: { type: 'boolean' },
    voltage_v: { type: ['number', 'null'] },
    current_a: { type: ['number', 'null'] },
    power_w: { type: ['number', 'null'] },
    power_factor: { type: ['number', 'null'] },
    frequency_hz: { type: ['number', 'null'] },
    ct_turns: { type: 'integer' },
    age_s: { type: ['number', 'null'] },
    taken_at: dateTime,
    took_s: { type: 'number' },
  },
};

const publishFailed = { status: 503, code: 'publish_failed', when: 'The device broker could not take the command.' };

export const meterRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/v1/meter/devices/{device_id}/intervals',
    operationId: 'listMeterIntervals',
    tag: 'Meter',
    summary: 'A meter’s interval records, by start time or by arrival',
    description:
      'By start time (`start`, `end`; defaults 24 hours before end, and now): oldest first by (start, sid, seq); `next_cursor` is null on the last page and carries the window ' +
      '(beside it `start`, `end`, `unknown_time` may be omitted, and must equal the first request’s if sent). `unknown_time=true` lists records with no determinable start. ' +
      'The window may span at most 366 days. By arrival (`received_since`, then `cursor`): every record in the order the server stored it; `next_cursor` is never null. ' +
      'An arrival cursor answered 400 invalid \'cursor\' predates a database restore: restart from `received_since` and de-duplicate by `sid` and `seq`.',
    permission: 'energy_read',
    target: { subject: 'meter.interval.list' },
    device: meter,
    query: {
      properties: {
        start: timeParam('Window start:'),
        end: timeParam('Window end (exclusive):'),
        received_since: timeParam('Arrival mode: records received at or after this'),
        limit: { type: 'integer', minimum: 1, maximum: 1000, description: 'Records per page (default 200, max 1000).' },
        cursor: { type: 'string', maxLength: 512, description: 'The previous answer’s next_cursor.' },
        unknown_time: { type: 'boolean', description: 'List the records with no determinable start.' },
      },
    },
    responses: { 200: { description: 'A page of records', schema: intervalsAnswer } },
    errors: [{ status: 400, code: 'validation_error', when: 'Invalid start, end, received_since or cursor, mixed modes, a cursor beside different values, or a window over 366 days.' }],
  },
  {
    method: 'GET',
    path: '/v1/meter/devices/{device_id}/summary',
    operationId: 'getMeterSummary',
    tag: 'Meter',
    summary: 'Statistics, coverage and energy of a meter over a window',
    description:
      'Sums exactly the records the intervals route lists by start time for the same window. Duration-weighted averages; power_factor only over records with a load (5 W before CT correction). ' +
      'Defaults: start 24 hours before end, end now. At most one calendar year: `end` no later than `start` plus one year (UTC).',
    permission: 'energy_read',
    target: { subject: 'meter.summary.get' },
    device: meter,
    query: { properties: { start: timeParam('Window start:'), end: timeParam('Window end (exclusive):') } },
    responses: { 200: { description: 'The summary', schema: summaryAnswer } },
  },
  {
    method: 'GET',
    path: '/v1/meter/devices/{device_id}/energy',
    operationId: 'getMeterEnergy',
    tag: 'Meter',
    summary: 'Consumption per hour or day',
    description:
      'Buckets are whole local hours or days of `tz` (an IANA zone; UTC when absent); a day at a daylight-saving change is 23 or 25 hours. A window needing 2000 or more buckets is 400. ' +
      'Consumption is in Wh, corrected for CT turns; a CT change is never a reset. Defaults: start 24 hours before end, end now.',
    permission: 'energy_read',
    target: { subject: 'meter.energy.get' },
    device: meter,
    query: {
      properties: {
        bucket: { type: 'string', enum: ['hour', 'day'], description: 'Bucket width (default hour).' },
        start: timeParam('Window start:'),
        end: timeParam('Window end (exclusive):'),
        tz: nameText({ maxLength: 64, description: 'IANA time zone name, e.g. Europe/Berlin.' }),
      },
    },
    responses: { 200: { description: 'The energy answer', schema: energyAnswer } },
  },
  {
    method: 'POST',
    path: '/v1/meter/devices/{device_id}/report',
    operationId: 'reportMeterInterval',
    tag: 'Meter',
    summary: 'Close the interval in progress now',
    description:
      'The meter closes its interval and sends a short record flagged `partial`; it reaches the intervals route a few seconds later. Each call closes an interval. ' +
      'A command to the device: it spends from the per-device command limits, as `report` through the system commands does.',
    permission: 'system_control',
    target: { subject: 'meter.report.send' },
    device: meter,
    idempotent: true,
    limits: ['device_command'],
    responses: { 202: { description: 'Handed to the broker', schema: commandAck } },
    errors: [publishFailed],
  },
  {
    method: 'POST',
    path: '/v1/meter/devices/{device_id}/sample',
    operationId: 'requestMeterSample',
    tag: 'Meter',
    summary: 'Ask a meter what it reads now',
    description:
      'Stores nothing and closes no interval. Poll the Location every second or two until state is not `pending`; the outcome is final within 30 seconds. ' +
      'At most one request per meter every 10 seconds, whoever asks (429 with Retry-After). ' +
      'A meter counts as connected from its first message: asked right after it (its `online` just acknowledged by the broker), ' +
      'the request waits up to half a second for the platform to receive that message rather than answering 409 `device_offline`.',
    permission: 'energy_read',
    target: { subject: 'meter.sample.create' },
    device: meter,
    idempotent: true,
    responses: {
      202: {
        description: 'Requested',
        headers: ['Location'],
        schema: {
          type: 'object',
          required: ['device_id', 'token', 'state', 'requested_at', 'timeout_s'],
          properties: { device_id: { type: 'string' }, token: { type: 'string' }, state: { type: 'string', enum: ['pending'] }, requested_at: dateTime, timeout_s: { type: 'number' } },
        },
      },
    },
    errors: [
      { status: 409, code: 'device_offline', when: 'The meter is not connected; nothing was sent. The body also carries status, status_changed_at, last_seen_at.' },
      { status: 429, code: 'rate_limited', when: 'A live reading of this meter was requested less than 10 seconds ago.' },
      publishFailed,
    ],
  },
  {
    method: 'GET',
    path: '/v1/meter/devices/{device_id}/sample/{token}',
    operationId: 'getMeterSample',
    tag: 'Meter',
    summary: 'A live reading request',
    permission: 'energy_read',
    target: { subject: 'meter.sample.get' },
    device: meter,
    params: { token: tokenParam },
    responses: {
      200: {
        description: 'The request',
        schema: {
          type: 'object',
          required: ['device_id', 'token', 'state', 'reason', 'requested_at', 'reading'],
          properties: {
            device_id: { type: 'string' },
            token: { type: 'string' },
            state: { type: 'string', enum: ['pending', 'done', 'failed', 'no_reply'] },
            reason: { type: ['string', 'null'], enum: ['busy', 'config_mode', 'unsupported', 'rejected', 'no_snapshot', null] },
            requested_at: dateTime,
            reading: liveReading,
          },
        },
      },
    },
    errors: [{ status: 404, code: 'not_found', when: 'No such token for this device.' }],
  },
  {
    method: 'POST',
    path: '/v1/meter/devices/{device_id}/resetenergy',
    operationId: 'resetMeterEnergy',
    tag: 'Meter',
    summary: 'Zero a meter’s lifetime energy counter',
    description:
      'Destructive and irreversible: `confirm` must equal the device id exactly; missing (an empty body, `{}`, or no body at all) or mismatched is 409 `confirmation_required` and nothing is sent. ' +
      'The call spends from the per-hour destructive ceiling and, as every command to a device, from the per-device command limits. Poll the Location.',
    permission: 'energy_reset',
    target: { subject: 'meter.reset.create' },
    device: meter,
    // Not `required` here: a missing confirm is the meter's 409 confirmation_required (spec: "else 409"), never a 400.
    body: { type: 'object', additionalProperties: false, properties: { confirm: { description: 'Must equal the device id exactly (a string); anything else is 409 confirmation_required.' } } },
    bodyOptional: true,
    idempotent: true,
    limits: ['device_command', 'destructive'],
    responses: {
      202: {
        description: 'Handed to the broker',
        headers: ['Location'],
        schema: {
          type: 'object',
          required: ['topic', 'payload', 'sent_at', 'command', 'device_id', 'token', 'state', 'requested_at'],
          properties: {
            topic: { type: 'string' },
            payload: { type: 'string' },
            sent_at: dateTime,
            command: { type: 'string' },
            device_id: { type: 'string' },
            token: { type: 'string' },
            state: { type: 'string', enum: ['pending'] },
            requested_at: dateTime,
          },
        },
      },
    },
    errors: [{ status: 409, code: 'confirmation_required', when: '`confirm` is missing or does not equal the device id; nothing was sent.' }, publishFailed],
  },
  {
    method: 'GET',
    path: '/v1/meter/devices/{device_id}/resetenergy/{token}',
    operationId: 'getMeterReset',
    tag: 'Meter',
    summary: 'An energy reset request',
    permission: 'energy_reset',
    target: { subject: 'meter.reset.get' },
    device: meter,
    params: { token: tokenParam },
    responses: {
      200: {
        description: 'The request',
        schema: {
          type: 'object',
          required: ['state', 'result', 'reason', 'at', 'requested_at', 'unmatched_rejection'],
          properties: {
            state: { type: 'string', enum: ['pending', 'done', 'duplicate', 'failed'] },
            result: { type: ['string', 'null'], description: 'The meter’s answer word (ok, duplicate, failed; unknown from a meter that does not know the verb, then failed with reason unsupported); null while pending.' },
            reason: { type: ['string', 'null'] },
            at: { ...dateTimeOrNull, description: 'When the answer arrived.' },
            requested_at: dateTime,
            unmatched_rejection: {
              type: ['object', 'null'],
              properties: { reason: { type: ['string', 'null'] }, at: dateTime },
              description: 'While pending: a refusal the meter sent without a readable token (it may concern this request).',
            },
          },
        },
      },
    },
    errors: [{ status: 404, code: 'not_found', when: 'No such token for this device.' }],
  },
];
