import { CHANNELS } from '@fleet/contracts';
import { nameText } from './schemas';
import type { ErrorSpec, JsonSchema, RouteDef } from './types';
import { DEVICE_ID_PATTERN } from '@fleet/device-protocol';

/** Routes owned by light-command: the predefined command catalog, raw commands, effects and state. */

const channelSchema: JsonSchema = { type: 'string', enum: [...CHANNELS] };

const commandResult: JsonSchema = {
  type: 'object',
  required: ['channel', 'command'],
  properties: {
    channel: { type: 'string', enum: [...CHANNELS] },
    command: { type: 'string', description: '`raw` for a raw command; the predefined command’s name for an effect.' },
    payload: {
      type: 'string',
      description: 'The wire payload the device received. Always on raw commands; on effects only when you also hold `raw_commands`.',
    },
  },
};

const numberParam: JsonSchema = {
  type: 'object',
  required: ['name', 'type', 'min', 'max', 'default'],
  properties: {
    name: { type: 'string' },
    type: { type: 'string', enum: ['number', 'color', 'file'] },
    description: { type: 'string' },
    unit: { type: 'string', enum: ['s', 'ratio', '%', 'count'] },
    min: { type: 'number', description: 'Effective minimum for your account.' },
    max: { type: 'number', description: 'Effective maximum for your account.' },
    default: { description: 'Used when the parameter is omitted: a number, or `RRGGBB` for a color, or a file name.' },
    step: { type: 'number', description: 'A value must be a whole multiple of this (the device’s resolution).' },
    zero_or_at_least: { type: 'number', description: 'Besides min..max: the value must be 0 or at least this.' },
    channels: { type: 'array', items: channelSchema, description: 'Present when the parameter applies only on these channels (overlay timing: light2, light3).' },
  },
};

const catalogAnswer: JsonSchema = {
  type: 'object',
  required: ['commands'],
  properties: {
    commands: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'channels', 'parameters'],
        properties: {
          name: { type: 'string' },
          description: { type: 'string' },
          channels: { type: 'array', items: channelSchema, description: 'Channels the command runs on that your account may command.' },
          parameters: {
            type: 'array',
            items: { ...numberParam, required: ['name', 'type', 'default'] },
            description: 'Numeric parameters carry your account’s effective `min`, `max` and `default`; colors and files carry a `default`.',
          },
        },
      },
    },
  },
};

const stateAnswer: JsonSchema = {
  type: 'object',
  required: ['device_id', 'state'],
  properties: {
    device_id: { type: 'string', pattern: DEVICE_ID_PATTERN },
    state: {
      type: 'object',
      description: 'One entry per channel you may command that the light has reported.',
      additionalProperties: {
        type: 'object',
        required: ['label', 'updated_at'],
        properties: {
          label: { type: 'string', description: 'The state for people, e.g. `Pulse #FF0000 every 1.2 s`, `Off`.' },
          updated_at: { type: 'string', format: 'date-time', description: 'When the light reported it.' },
          payload: { type: 'string', description: 'Only with `raw_commands`: the wire payload reported (empty when idle).' },
        },
      },
    },
  },
};

const publishFailed: ErrorSpec = { status: 503, code: 'publish_failed', when: 'The command is valid but the device broker did not take it; nothing was sent.' };
const channelRefused: ErrorSpec = { status: 403, code: 'forbidden', when: 'Your account may not command this channel (no permission lifts this: no `required_permission`); checked with the permission, before the body, the device and the limits.' };

export const lightRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/v1/commands',
    operationId: 'listCommands',
    tag: 'Light commands',
    summary: 'The predefined commands your account may use, with effective parameter bounds',
    description:
      'Every command of the catalog unless staff withdrew it for your account, the channels it runs on that you may command, and each parameter’s effective `min`, `max` and `default` (staff may narrow them per account). ' +
      'Effects on light2 and light3 are wrapped as repeating overlays: their `duration_s` and `interval_s` parameters apply there only.',
    permission: 'predefined_commands',
    target: { subject: 'light.command.catalog' },
    responses: { 200: { description: 'The catalog for your account', schema: catalogAnswer } },
  },
  {
    method: 'POST',
    path: '/v1/devices/{device_id}/commands',
    operationId: 'sendRawCommand',
    tag: 'Light commands',
    summary: 'Send a raw wire payload to one channel of a light',
    description:
      'The payload reaches the light on `cmd/<channel>` byte for byte. The wire grammar is always enforced; the availability caps (period at least 100 ms, overlay duration at most 600 s, ' +
      'overlay interval 0 or at least 10 s, contact pulse at most 10 s) apply unless you hold `relaxed_caps`. 202 once the broker took the command.',
    permission: 'raw_commands',
    channelIn: { field: 'channel' },
    target: { subject: 'light.command.raw' },
    device: { product: 'light' },
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['channel', 'payload'],
      examples: [{ channel: 'light1', payload: 'pulse:FF0000,1200' }],
      properties: {
        channel: channelSchema,
        payload: nameText({ minLength: 1, maxLength: 255, description: 'A light wire payload, e.g. `pulse:FF0000,1200` or `solid:00FF00@5000/60000` (light2/light3); never control characters.' }),
      },
    },
    idempotent: true,
    limits: ['device_command'],
    responses: { 202: { description: 'Handed to the broker', schema: commandResult } },
    errors: [
      { status: 400, code: 'validation_error', when: 'Bad channel or payload. The payload breaks the wire grammar, or an availability cap without `relaxed_caps`.' },
      channelRefused,
      publishFailed,
    ],
  },
  {
    method: 'POST',
    path: '/v1/devices/{device_id}/channels/{channel}/effects',
    operationId: 'applyEffect',
    tag: 'Light commands',
    summary: 'Run a predefined command on one channel of a light',
    description:
      'The command must be listed for your account (see GET /v1/commands: the whole catalog unless staff withdrew a command); every parameter is checked against your account’s bounds and refused (400, naming the field) when out of range, never clamped; ' +
      'omitted parameters take their default. Availability caps always apply. On light2 and light3 the effect is wrapped as a repeating overlay from `duration_s` and `interval_s`. ' +
      'The answer carries the wire `payload` only when you also hold `raw_commands`.',
    permission: 'predefined_commands',
    channelIn: { param: 'channel' },
    target: { subject: 'light.effect.apply' },
    device: { product: 'light' },
    params: { channel: channelSchema },
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['command'],
      examples: [{ command: 'pulse', params: { color: 'FF0000', period_s: 1.2 } }],
      properties: {
        command: nameText({ minLength: 1, maxLength: 64 }),
        params: { type: 'object', description: 'Parameter values by name; see GET /v1/commands.' },
      },
    },
    idempotent: true,
    limits: ['device_command'],
    responses: { 202: { description: 'Handed to the broker', schema: commandResult } },
    errors: [
      { status: 400, code: 'validation_error', when: 'Unknown command, a channel the command does not run on, or a parameter that is unknown, mistyped or outside your bounds.' },
      { status: 403, code: 'forbidden', when: 'Your account may not command this channel, or staff withdrew this command for your account (no `required_permission`).' },
      publishFailed,
    ],
  },
  {
    method: 'GET',
    path: '/v1/devices/{device_id}/state',
    operationId: 'getLightState',
    tag: 'Light commands',
    summary: 'The last state each channel you may command reported',
    permission: 'state_read',
    target: { subject: 'light.state.get' },
    device: { product: 'light' },
    responses: { 200: { description: 'The state per channel', schema: stateAnswer } },
  },
];
