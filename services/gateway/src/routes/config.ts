import { DEVICE_ID_PATTERN } from '@fleet/device-protocol';
import { API_EFFECT_FIELDS, API_RANGES } from '@fleet/light-wire';
import { NOT_FOUND_WHEN_INVALID, type ErrorSpec, type JsonSchema, type RouteDef } from './types';

/**
 * Routes owned by config-alerting: a device's configuration, sensor attachments, alert profiles
 * and alert signals. The schemas here check shapes; config-alerting checks what a schema cannot
 * (ranges as the light runs them, never rounded; repeat times against animations; names; caps).
 */

const LEVELS = ['CLEAR', 'ADVISORY', 'WARNING', 'NO_SENSORS', 'INSUFFICENT_DATA', 'STALE_DATA', 'UNKNOWN'];
const METRICS = ['reading_count', 'newest_age_secs', 'latest_breach', 'consecutive_breaches', 'breaches_in_window', 'latest_temp_c', 'latest_humidity', 'min_temp_c', 'max_temp_c'];
const OPERATORS = ['==', '!=', '<', '<=', '>', '>=', 'is_null', 'not_null'];
const SIGNAL_KEYS = ['CLEAR', 'ADVISORY', 'WARNING', 'NO_DATA'];
const SENSOR_ID: JsonSchema = { type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,64}$', description: 'The sensor id: 1–64 letters, digits, `_`, `-`, `.`, `:`.' };
// In the path any text: what is not a sensor id is no sensor attached, 404 as the spec has it.
const ATTACHED_SENSOR: JsonSchema = { type: 'string', description: 'An attached sensor’s id; anything else is 404.' };
// Any integer: one that names no row of the partner's (0, negative, too large) is 404, as the spec
// has it for a profile or signal that is not global or own; so is a path id that is no integer.
const rowId: JsonSchema = { type: 'integer', [NOT_FOUND_WHEN_INVALID]: true };
const text = (max: number, description: string): JsonSchema => ({ type: 'string', minLength: 1, maxLength: max, description });

const condition: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['metric', 'op'],
  properties: {
    metric: { type: 'string', enum: METRICS },
    op: { type: 'string', enum: OPERATORS },
    value: { type: ['number', 'boolean', 'null'], description: 'A number; true or false for `latest_breach`; ignored with `is_null` and `not_null` (may be left out).' },
  },
};

const rules: JsonSchema = {
  type: 'array',
  maxItems: 20,
  description: 'Ordered; the first rule whose conditions all hold gives the level, else `default`.',
  items: {
    type: 'object',
    additionalProperties: false,
    required: ['all', 'level'],
    properties: { all: { type: 'array', maxItems: 8, items: condition, description: 'Conditions that must all hold; an empty list always holds.' }, level: { type: 'string', enum: LEVELS } },
  },
};

const profile: JsonSchema = {
  type: 'object',
  required: ['id', 'name', 'scope', 'version', 'description', 'rules', 'default'],
  properties: {
    id: { type: 'integer' },
    name: { type: 'string' },
    scope: { type: 'string', enum: ['global', 'partner'] },
    is_default: { type: 'boolean', description: 'The Default profile (sensors without a profile use it).' },
    version: { type: 'integer' },
    description: { type: ['string', 'null'] },
    rules,
    default: { type: 'string', enum: LEVELS },
  },
};

const colorSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['r', 'g', 'b'],
  properties: Object.fromEntries(['r', 'g', 'b'].map((c) => [c, { type: 'integer', minimum: API_RANGES.color_component.min, maximum: API_RANGES.color_component.max }])),
};
const rangeOf = (range: { min: number; max: number }, integer = false): JsonSchema => ({ type: integer ? 'integer' : 'number', minimum: range.min, maximum: range.max });

/** The schema of one field of a light effect, by its name (light-wire's API_EFFECT_FIELDS). */
function effectFieldSchema(field: string): JsonSchema {
  if (field.includes('color')) return colorSchema;
  if (field.endsWith('period_s')) return { ...rangeOf(API_RANGES.period_s), description: 'Seconds, a multiple of 0.001.' };
  if (field.endsWith('_time_s')) return { ...rangeOf(API_RANGES.animation_s), description: 'Seconds, a multiple of 0.001.' };
  if (field.endsWith('width')) return rangeOf(API_RANGES.width, true);
  if (field.endsWith('duty_ratio')) return { ...rangeOf(API_RANGES.duty_ratio), description: 'A multiple of 0.01.' };
  if (field === 'repeat_s') return { ...rangeOf(API_RANGES.repeat_s, true), description: '0: play once; otherwise longer than the animation.' };
  if (field === 'brightness_per') return rangeOf(API_RANGES.brightness_per, true);
  throw new Error(`no schema for the light effect field '${field}'`);
}

/** A light effect: the fields of its type, each required, and nothing else (spec, Alert signal). */
const effect: JsonSchema = {
  type: 'object',
  required: ['type'],
  properties: { type: { type: 'string', enum: Object.keys(API_EFFECT_FIELDS) } },
  allOf: Object.entries(API_EFFECT_FIELDS).map(([type, fields]) => ({
    if: { properties: { type: { const: type } } },
    then: {
      required: [...fields],
      additionalProperties: false,
      properties: { type: { const: type }, ...Object.fromEntries(fields.map((f) => [f, effectFieldSchema(f)])) },
    },
  })),
  description:
    'A light effect; every field of its type is required: Solid (color); Pulse (color, period_s); PulseThenSolid (pulse_time_s, pulse_color, pulse_period_s, solid_color, repeat_s); ' +
    'Chase (color, period_s, width); ChaseThenSolid (chase_time_s, chase_color, chase_period_s, chase_width, solid_color, repeat_s); Toggle (color1, color2, period_s, duty_ratio); ' +
    'ToggleThenSolid (toggle_time_s, toggle_color1, toggle_color2, toggle_period_s, toggle_duty_ratio, solid_color, repeat_s); BluChase (period_s, brightness_per). ' +
    'Colors {r,g,b} 0–255; periods 0.1–9.999 s; animation times 0.1–99.999 s; width 1–12; duty ratios 0.01–0.99; repeat_s whole 0–999999 (0 = once, else longer than the animation); brightness_per 0–99. ' +
    'Values are never rounded: one the light cannot run exactly (a period of 0.1005 s) is 400.',
};

const entries: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: SIGNAL_KEYS,
  description: 'What light1 shows at each level; NO_DATA covers NO_SENSORS, INSUFFICENT_DATA, STALE_DATA and UNKNOWN.',
  examples: [
    {
      CLEAR: { light: { type: 'Solid', color: { r: 0, g: 255, b: 0 } } },
      ADVISORY: { light: { type: 'PulseThenSolid', pulse_time_s: 5, pulse_color: { r: 255, g: 191, b: 0 }, pulse_period_s: 1, solid_color: { r: 255, g: 191, b: 0 }, repeat_s: 60 } },
      WARNING: { light: { type: 'Pulse', color: { r: 255, g: 0, b: 0 }, period_s: 0.5 } },
      NO_DATA: { light: { type: 'Pulse', color: { r: 0, g: 0, b: 255 }, period_s: 2 } },
    },
  ],
  properties: Object.fromEntries(SIGNAL_KEYS.map((k) => [k, { type: 'object', additionalProperties: false, required: ['light'], properties: { light: effect } }])),
};

const signal: JsonSchema = {
  type: 'object',
  required: ['id', 'name', 'scope', 'is_default', 'version', 'description', 'entries'],
  properties: {
    id: { type: 'integer' },
    name: { type: 'string' },
    scope: { type: 'string', enum: ['global', 'partner'] },
    is_default: { type: 'boolean' },
    version: { type: 'integer' },
    description: { type: ['string', 'null'] },
    entries,
  },
};

const idAnswer: JsonSchema = { type: 'object', required: ['id'], properties: { id: { type: 'integer' } } };
const versionAnswer: JsonSchema = { type: 'object', required: ['id', 'version'], properties: { id: { type: 'integer' }, version: { type: 'integer' } } };

const configAnswer: JsonSchema = {
  type: 'object',
  required: ['device_id', 'name', 'org_node', 'sensors', 'automation_enabled', 'alert_signal_id'],
  properties: {
    device_id: { type: 'string', pattern: DEVICE_ID_PATTERN },
    name: { type: ['string', 'null'] },
    org_node: {
      type: ['object', 'null'],
      required: ['id', 'parent_id', 'name'],
      properties: { id: { type: 'integer' }, parent_id: { type: ['integer', 'null'] }, name: { type: 'string' } },
    },
    sensors: {
      type: 'array',
      items: {
        type: 'object',
        required: ['tdl_id', 'label', 'profile'],
        properties: {
          tdl_id: SENSOR_ID,
          label: { type: ['string', 'null'] },
          profile: { type: 'object', required: ['id', 'name', 'version'], properties: { id: { type: 'integer' }, name: { type: 'string' }, version: { type: 'integer' } }, description: 'The profile the sensor is evaluated with (the Default profile when none was chosen).' },
          profile_id: { type: ['integer', 'null'], description: 'The chosen profile; null = the Default profile.' },
          level: { type: ['string', 'null'], enum: [...LEVELS, null], description: 'The sensor’s level at the last evaluation; null before the first.' },
        },
      },
    },
    automation_enabled: { type: 'boolean' },
    alert_signal_id: { type: ['integer', 'null'], description: 'The light’s signal; null = the default signal.' },
    alert_level: { type: ['string', 'null'], enum: [...LEVELS, null], description: 'The light’s level at the last evaluation (the most severe of its sensors’); null before the first.' },
  },
};

const notVisible = (what: string): ErrorSpec => ({ status: 404, code: 'not_found', when: `${what}` });
const nameTaken: ErrorSpec = { status: 409, code: 'name_taken', when: 'You already see a row of that kind with that name (global or your own).' };
const limitReached = (kind: string): ErrorSpec => ({ status: 403, code: 'limit_reached', when: `You already hold 50 ${kind}.` });

export const configRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/v1/devices/{device_id}/config',
    operationId: 'getDeviceConfig',
    tag: 'Configuration',
    summary: 'A device’s configuration: name, org node, sensors, automation and alert signal',
    description: 'Name, org node and automation are read from the device record at the time of the request, so a rename or move followed by a read shows the change.',
    permission: 'config_read',
    target: { subject: 'config.device.get' },
    device: {},
    responses: { 200: { description: 'The configuration', schema: configAnswer } },
  },
  {
    method: 'POST',
    path: '/v1/devices/{device_id}/sensors',
    operationId: 'attachSensor',
    tag: 'Configuration',
    summary: 'Attach a sensor the light relays',
    permission: 'config_write',
    target: { subject: 'config.sensor.attach' },
    device: { product: 'light' },
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['tdl_id'],
      properties: {
        tdl_id: SENSOR_ID,
        profile_id: { type: ['integer', 'null'], description: 'A global or own profile; null or left out = the Default profile.' },
        label: { type: ['string', 'null'], minLength: 1, maxLength: 120, description: 'A name for people.' },
      },
    },
    idempotent: true,
    limits: ['config_mutation'],
    responses: {
      201: {
        description: 'Attached',
        headers: ['Location'],
        schema: { type: 'object', required: ['device_id', 'tdl_id', 'profile_id'], properties: { device_id: { type: 'string' }, tdl_id: SENSOR_ID, profile_id: { type: ['integer', 'null'] }, label: { type: 'string' } } },
      },
    },
    errors: [{ status: 409, code: 'already_attached', when: 'The sensor is already on this device.' }, notVisible('The profile is neither global nor yours.')],
  },
  {
    method: 'PUT',
    path: '/v1/devices/{device_id}/sensors/{tdl_id}',
    operationId: 'setSensorProfile',
    tag: 'Configuration',
    summary: 'Choose a sensor’s profile',
    permission: 'config_write',
    target: { subject: 'config.sensor.update' },
    device: { product: 'light' },
    params: { tdl_id: ATTACHED_SENSOR },
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['profile_id'],
      properties: { profile_id: { type: ['integer', 'null'], description: 'null clears to the Default profile.' }, label: { type: ['string', 'null'], minLength: 1, maxLength: 120 } },
    },
    limits: ['config_mutation'],
    responses: { 204: { description: 'Changed' } },
    errors: [notVisible('The sensor is not attached, or the profile is neither global nor yours.')],
  },
  {
    method: 'DELETE',
    path: '/v1/devices/{device_id}/sensors/{tdl_id}',
    operationId: 'detachSensor',
    tag: 'Configuration',
    summary: 'Detach a sensor',
    permission: 'config_write',
    target: { subject: 'config.sensor.detach' },
    device: { product: 'light' },
    params: { tdl_id: ATTACHED_SENSOR },
    limits: ['config_mutation'],
    responses: { 204: { description: 'Detached' } },
    errors: [notVisible('The sensor is not attached.')],
  },
  {
    method: 'PUT',
    path: '/v1/devices/{device_id}/alert-signal',
    operationId: 'chooseAlertSignal',
    tag: 'Configuration',
    summary: 'Choose the alert signal a light shows',
    description: 'The light shows the new signal at its next alert-state change, or within the hour.',
    permission: 'config_write',
    target: { subject: 'config.device.signal' },
    device: { product: 'light' },
    body: { type: 'object', additionalProperties: false, required: ['alert_signal_id'], properties: { alert_signal_id: { type: ['integer', 'null'], description: 'A global or own signal; null or the default signal’s id = the default.' } } },
    limits: ['config_mutation'],
    responses: {
      200: {
        description: 'The light’s signal',
        schema: { type: 'object', required: ['device_id', 'alert_signal_id'], properties: { device_id: { type: 'string', pattern: DEVICE_ID_PATTERN }, alert_signal_id: { type: ['integer', 'null'] } } },
      },
    },
    errors: [notVisible('The signal is neither global nor yours.')],
  },
  {
    method: 'GET',
    path: '/v1/profiles',
    operationId: 'listProfiles',
    tag: 'Alerting',
    summary: 'Alert profiles: the global ones and your own',
    permission: 'config_read',
    target: { subject: 'config.profile.list' },
    responses: { 200: { description: 'The profiles', schema: { type: 'object', required: ['profiles'], properties: { profiles: { type: 'array', items: profile } } } } },
  },
  {
    method: 'POST',
    path: '/v1/profiles',
    operationId: 'createProfile',
    tag: 'Alerting',
    summary: 'Create an alert profile',
    permission: 'profile_manage',
    target: { subject: 'config.profile.create' },
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['name', 'rules'],
      examples: [
        {
          name: 'Freezer',
          description: 'Warm above -15 °C twice in a row; silent sensors are no data.',
          rules: [
            { all: [{ metric: 'reading_count', op: '==', value: 0 }], level: 'NO_SENSORS' },
            { all: [{ metric: 'consecutive_breaches', op: '>=', value: 2 }, { metric: 'latest_temp_c', op: '>', value: -15 }], level: 'WARNING' },
          ],
          default: 'CLEAR',
        },
      ],
      properties: { name: text(120, '1–120 characters, unique among the profiles you see.'), description: { type: ['string', 'null'], maxLength: 1000 }, rules, default: { type: 'string', enum: LEVELS, default: 'CLEAR' } },
    },
    idempotent: true,
    limits: ['config_mutation'],
    responses: { 201: { description: 'Created', headers: ['Location'], schema: idAnswer } },
    errors: [nameTaken, limitReached('profiles')],
  },
  {
    method: 'PUT',
    path: '/v1/profiles/{profile_id}',
    operationId: 'updateProfile',
    tag: 'Alerting',
    summary: 'Update one of your alert profiles (its version goes up; the old one is kept as a revision)',
    description: 'Takes effect at the next evaluation cycle (about 2 minutes).',
    permission: 'profile_manage',
    target: { subject: 'config.profile.update' },
    params: { profile_id: rowId },
    body: { type: 'object', additionalProperties: false, minProperties: 1, properties: { name: text(120, '1–120 characters.'), description: { type: ['string', 'null'], maxLength: 1000 }, rules, default: { type: 'string', enum: LEVELS } } },
    limits: ['config_mutation'],
    responses: { 200: { description: 'Updated', schema: versionAnswer } },
    errors: [nameTaken, notVisible('Not one of your own profiles (global, default and other partners’ profiles cannot be changed).')],
  },
  {
    method: 'DELETE',
    path: '/v1/profiles/{profile_id}',
    operationId: 'deleteProfile',
    tag: 'Alerting',
    summary: 'Delete one of your alert profiles',
    permission: 'profile_manage',
    target: { subject: 'config.profile.delete' },
    params: { profile_id: rowId },
    limits: ['config_mutation'],
    responses: { 204: { description: 'Deleted' } },
    errors: [{ status: 409, code: 'in_use', when: 'Sensors still use the profile; the body’s `count` says how many.' }, notVisible('Not one of your own profiles.')],
  },
  {
    method: 'GET',
    path: '/v1/alert-signals',
    operationId: 'listAlertSignals',
    tag: 'Alerting',
    summary: 'Alert signals: the global ones (the default included) and your own',
    permission: 'config_read',
    target: { subject: 'config.signal.list' },
    responses: { 200: { description: 'The signals', schema: { type: 'object', required: ['alert_signals'], properties: { alert_signals: { type: 'array', items: signal } } } } },
  },
  {
    method: 'POST',
    path: '/v1/alert-signals',
    operationId: 'createAlertSignal',
    tag: 'Alerting',
    summary: 'Create an alert signal',
    permission: 'signal_manage',
    target: { subject: 'config.signal.create' },
    body: { type: 'object', additionalProperties: false, required: ['name', 'entries'], properties: { name: text(120, '1–120 characters, unique among the signals you see.'), description: { type: ['string', 'null'], maxLength: 1000 }, entries } },
    idempotent: true,
    limits: ['config_mutation'],
    responses: { 201: { description: 'Created', headers: ['Location'], schema: idAnswer } },
    errors: [nameTaken, limitReached('signals')],
  },
  {
    method: 'PUT',
    path: '/v1/alert-signals/{signal_id}',
    operationId: 'updateAlertSignal',
    tag: 'Alerting',
    summary: 'Update one of your alert signals (its version goes up)',
    description: 'Lights showing the signal show the new entries at their next alert-state change, or within the hour.',
    permission: 'signal_manage',
    target: { subject: 'config.signal.update' },
    params: { signal_id: rowId },
    body: { type: 'object', additionalProperties: false, minProperties: 1, properties: { name: text(120, '1–120 characters.'), description: { type: ['string', 'null'], maxLength: 1000 }, entries } },
    limits: ['config_mutation'],
    responses: { 200: { description: 'Updated', schema: versionAnswer } },
    errors: [nameTaken, notVisible('Not one of your own signals (global and default signals cannot be changed).')],
  },
  {
    method: 'DELETE',
    path: '/v1/alert-signals/{signal_id}',
    operationId: 'deleteAlertSignal',
    tag: 'Alerting',
    summary: 'Delete one of your alert signals',
    description: 'Allowed while lights show it: they go back to the default signal.',
    permission: 'signal_manage',
    target: { subject: 'config.signal.delete' },
    params: { signal_id: rowId },
    limits: ['config_mutation'],
    responses: { 204: { description: 'Deleted' } },
    errors: [notVisible('Not one of your own signals.')],
  },
];
