import { CHANNELS } from '@fleet/contracts';
import { deviceIdParam, nameText } from './schemas';
import type { JsonSchema, RouteDef } from './types';
import { DEVICE_ID_PATTERN } from '@fleet/device-protocol';

/** Routes owned by device-registry: devices, provisioning, removal, health, org tree and placement. */

const dateTimeOrNull: JsonSchema = { type: ['string', 'null'], format: 'date-time' };

export const deviceSchema: JsonSchema = {
  type: 'object',
  required: ['device_id', 'name', 'product'],
  properties: {
    device_id: { type: 'string', pattern: DEVICE_ID_PATTERN },
    name: { type: ['string', 'null'], description: 'Display name, or null when none was given.' },
    product: { type: ['string', 'null'], enum: ['light', 'meter', null], description: '`light` or `meter`; null only for an unknown product.' },
    channels: {
      type: 'array',
      items: { type: 'string', enum: [...CHANNELS] },
      description: 'Only on a `light`: the channels you may command (your account’s allowed channels). Absent on a meter.',
    },
    automation_enabled: { type: 'boolean', description: 'Only on a `light`: whether temperature automation rewrites light1.' },
    status: {
      type: ['string', 'null'],
      enum: ['connected', 'disconnected', null],
      description: 'Only with `health_read`. Any message the device sends connects it; the broker’s report of a lost connection, or about 25 minutes of silence, disconnects it.',
    },
    status_changed_at: { ...dateTimeOrNull, description: 'Only with `health_read`: when `status` last changed.' },
    last_seen_at: { ...dateTimeOrNull, description: 'Only with `health_read`: the last traffic the device itself sent (traffic sent to it never counts).' },
  },
};

const provisionBody: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['credential_format'],
  examples: [{ credential_format: 'derived-v1', product: 'light', name: 'Lobby light' }],
  properties: {
    credential_format: { type: 'string', enum: ['derived-v1'], description: 'Must be `derived-v1`; otherwise 400 and nothing is created.' },
    credential_source: {
      type: 'string',
      enum: ['generate', 'root_secret', 'mqtt_password'],
      default: 'generate',
      description:
        '`generate` (default): the server mints the 16-character root secret and returns it once as `password`. `root_secret`: you supply it (re-enrolling). ' +
        '`mqtt_password`: you supply the 32-character broker password, used verbatim (the device then has no settings key, so secret settings cannot be written). ' +
        'Only the field matching the choice may be sent; the other is refused.',
    },
    root_secret: {
      type: 'string',
      pattern: '^[\\x21-\\x7E]{16}$',
      description: 'Required for `root_secret`: 16 printable ASCII characters, no whitespace. The broker password is HKDF-SHA256 of it (salt the device id, info `<product>/mqtt/v1`). Never stored, never echoed.',
    },
    mqtt_password: { type: 'string', pattern: '^[0-9a-f]{32}$', description: 'Required for `mqtt_password`: 32 lowercase hexadecimal characters, used verbatim. Never echoed.' },
    product: {
      type: 'string',
      enum: ['light', 'meter'],
      default: 'light',
      description: 'Selects the derivation label `<product>/mqtt/v1`, the broker topic root and the broker ACL subtree.',
    },
    name: nameText({ minLength: 1, maxLength: 120, description: 'Optional display name, 1–120 characters, no control characters.' }),
    org: nameText({
      minLength: 1,
      description:
        'Organization placement, by name. With `access_all_devices`: optional, must name an existing root organization; omitted, the device goes to the root Staging / Inventory node. ' +
        'Organization-scoped partners: required, must name exactly one organization inside a granted subtree (`unknown organization \'<org>\'`, or `organization \'<org>\' is ambiguous: N organizations in your scope share that name`). Provisioning never creates organizations. No control characters.',
    }),
  },
};

const provisionAnswer: JsonSchema = {
  type: 'object',
  required: ['device_id', 'credential_format', 'product'],
  properties: {
    device_id: { type: 'string', pattern: DEVICE_ID_PATTERN },
    credential_format: { type: 'string', enum: ['derived-v1'] },
    product: { type: 'string', enum: ['light', 'meter'] },
    password: {
      type: 'string',
      description: 'Only with `credential_source` `generate`: the root secret (not the broker password), shown once. A replay with the same `Idempotency-Key` returns it again.',
    },
    name: { type: 'string', description: 'Present when given.' },
    org: { type: 'string', description: 'Present when given.' },
  },
};

// No type: any value that is not the device id, a number or null included, is the spec's 409
// confirmation_required, never a 400.
const confirmSchema: JsonSchema = { description: 'Must equal the device id exactly (a string); anything else is 409 confirmation_required.' };

const healthAnswer: JsonSchema = {
  type: 'object',
  required: ['device_id', 'status', 'status_changed_at', 'last_seen_at', 'telemetry'],
  properties: {
    device_id: { type: 'string', pattern: DEVICE_ID_PATTERN },
    status: { type: ['string', 'null'], enum: ['connected', 'disconnected', null] },
    status_changed_at: dateTimeOrNull,
    last_seen_at: dateTimeOrNull,
    telemetry: {
      type: 'array',
      description: 'Telemetry the device sent (`<root>/<device_id>/tele/<kind>`), newest first.',
      items: {
        type: 'object',
        required: ['created_at', 'topic', 'payload'],
        properties: {
          created_at: { type: 'string', format: 'date-time', description: 'When the server took the message off the network.' },
          topic: { type: 'string', description: 'The MQTT topic it arrived on.' },
          payload: { type: 'string', description: 'The payload as sent (JSON text).' },
        },
      },
    },
  },
};

const orgNode: JsonSchema = {
  type: 'object',
  required: ['id', 'parent_id', 'name'],
  properties: { id: { type: 'integer' }, parent_id: { type: ['integer', 'null'] }, name: { type: 'string' } },
};

const brokerUnavailable = (when: string) => ({ status: 503, code: 'broker_unavailable', when });

export const deviceRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/v1/devices',
    operationId: 'listDevices',
    tag: 'Devices',
    summary: 'The devices in your scope, in device-id order',
    description: 'Every device in your scope, optionally of one product, in device-id order. An unknown `product` is 400, never an empty list.',
    permission: null,
    target: { subject: 'registry.device.list' },
    query: { properties: { product: { type: 'string', enum: ['light', 'meter'], description: 'Only devices of this product.' } } },
    responses: {
      200: {
        description: 'The devices',
        schema: { type: 'object', required: ['devices'], properties: { devices: { type: 'array', items: deviceSchema } } },
      },
    },
  },
  {
    method: 'GET',
    path: '/v1/devices/{device_id}',
    operationId: 'getDevice',
    tag: 'Devices',
    summary: 'One device',
    permission: null,
    target: { subject: 'registry.device.get' },
    device: { ownerResolves: true },
    responses: { 200: { description: 'The device', schema: deviceSchema } },
  },
  {
    method: 'POST',
    path: '/v1/devices/{device_id}',
    operationId: 'provisionDevice',
    tag: 'Devices',
    summary: 'Provision a device: its broker credential and ACL, then its record',
    description:
      'Creates the device’s broker credential and ACL, then its record; if either fails the answer is 503 and nothing persists. ' +
      'The device id is 12 uppercase hexadecimal characters. An id already in use is 409 `conflict` and nothing changes.',
    permission: 'device_provisioning',
    target: { subject: 'registry.device.provision' },
    params: { device_id: deviceIdParam },
    body: provisionBody,
    idempotent: true,
    responses: { 201: { description: 'Provisioned', schema: provisionAnswer, headers: ['Location'] } },
    errors: [
      {
        status: 400,
        code: 'validation_error',
        when: 'A provision rule is broken: credential_format, credential_source and its field, device id, product, name, or organization placement (unknown, ambiguous, missing for an organization-scoped partner).',
      },
      { status: 409, code: 'conflict', when: 'The device id is already in use; nothing changed.' },
      brokerUnavailable('The device broker could not create the credential; nothing persisted.'),
    ],
  },
  {
    method: 'DELETE',
    path: '/v1/devices/{device_id}',
    operationId: 'removeDevice',
    tag: 'Devices',
    summary: 'Remove a device: cut its broker credential, then delete its record',
    description:
      'Destructive. `confirm` equal to the device id is required, as the query parameter or in a JSON body. The broker credential is deleted first (which disconnects the device), then the record and what cascades from it (automation suspensions, sensor attachments, telemetry). ' +
      'If the broker removal fails the answer is 503 and the record is kept: retry.',
    permission: 'device_removal',
    target: { subject: 'registry.device.remove' },
    device: {},
    query: { properties: { confirm: confirmSchema } },
    body: { type: 'object', additionalProperties: false, properties: { confirm: confirmSchema } },
    bodyOptional: true,
    limits: ['destructive'],
    responses: { 204: { description: 'Removed' } },
    errors: [
      { status: 409, code: 'confirmation_required', when: '`confirm` is missing or does not equal the device id; nothing was removed.' },
      brokerUnavailable('The device broker could not remove the credential; the device is kept, retry.'),
    ],
  },
  {
    method: 'GET',
    path: '/v1/devices/{device_id}/health',
    operationId: 'getDeviceHealth',
    tag: 'Devices',
    summary: 'A device’s connectivity and recent telemetry',
    permission: 'health_read',
    target: { subject: 'registry.device.health' },
    device: { ownerResolves: true },
    query: {
      properties: {
        hours: { type: 'integer', minimum: 1, maximum: 720, default: 24, description: 'How far back telemetry goes, in hours (default 24, max 720).' },
        limit: { type: 'integer', minimum: 1, maximum: 500, default: 100, description: 'Most telemetry rows returned (default 100, max 500).' },
      },
    },
    responses: { 200: { description: 'Connectivity and telemetry', schema: healthAnswer } },
  },
  {
    method: 'GET',
    path: '/v1/org-tree',
    operationId: 'getOrgTree',
    tag: 'Configuration',
    summary: 'The organization nodes in your scope',
    description:
      'Your granted subtrees as a forest (each granted root’s `parent_id` is null); the whole tree with `access_all_devices`; an empty list, not an error, when nothing is granted.',
    permission: 'config_read',
    target: { subject: 'registry.org.tree' },
    responses: {
      200: { description: 'The nodes', schema: { type: 'object', required: ['nodes'], properties: { nodes: { type: 'array', items: orgNode } } } },
    },
  },
  {
    method: 'PATCH',
    path: '/v1/devices/{device_id}/config',
    operationId: 'renameDevice',
    tag: 'Configuration',
    summary: 'Rename a device',
    permission: 'config_write',
    target: { subject: 'registry.device.rename' },
    device: {},
    body: { type: 'object', additionalProperties: false, required: ['name'], properties: { name: nameText({ minLength: 1, maxLength: 120, description: 'The display name, 1–120 characters, no control characters.' }) } },
    limits: ['config_mutation'],
    responses: { 204: { description: 'Renamed' } },
  },
  {
    method: 'PUT',
    path: '/v1/devices/{device_id}/org',
    operationId: 'moveDevice',
    tag: 'Configuration',
    summary: 'Move a device to another organization node',
    description:
      'The target must lie inside your scope. `org_node_id: null` detaches the device to Staging / Inventory and needs `access_all_devices`; for an organization-scoped partner it is always 409 `would_lose_access`.',
    permission: 'config_write',
    target: { subject: 'registry.device.move' },
    device: {},
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['org_node_id'],
      properties: { org_node_id: { type: ['integer', 'null'], description: 'The target node, or null for Staging / Inventory.' } },
    },
    limits: ['config_mutation'],
    responses: { 204: { description: 'Moved' } },
    errors: [
      { status: 403, code: 'node_out_of_scope', when: 'The target node is outside your scope (or does not exist).' },
      { status: 409, code: 'would_lose_access', when: 'The move would remove your own access to the device (`null` from an organization-scoped partner).' },
    ],
  },
  {
    method: 'PUT',
    path: '/v1/devices/{device_id}/automation',
    operationId: 'setAutomation',
    tag: 'Devices',
    summary: 'Suspend or resume a light’s temperature automation',
    description: 'While automation is disabled, temperature automation no longer rewrites light1.',
    permission: 'automation_control',
    target: { subject: 'registry.device.automation' },
    device: { product: 'light' },
    body: { type: 'object', additionalProperties: false, required: ['enabled'], properties: { enabled: { type: 'boolean' } } },
    limits: ['config_mutation'],
    responses: {
      200: {
        description: 'The automation switch',
        schema: {
          type: 'object',
          required: ['device_id', 'automation_enabled'],
          properties: { device_id: { type: 'string', pattern: DEVICE_ID_PATTERN }, automation_enabled: { type: 'boolean' } },
        },
      },
    },
  },
];
