import { subjectsOf, type Principal, type RequestEnvelope, type SubjectsOf } from '@fleet/contracts';
import { encodePayload, isChannel, stateLabel, type LightChannel } from '@fleet/light-wire';
import { ForbiddenError, NotFoundError, ValidationError, type Bus, type Logger, type ServiceHandlers } from '@fleet/service-kit';
import type { MessagePublisher } from '@fleet/bridge-client';
import { commandTopic } from '@fleet/device-protocol';
import { availableCommands, buildCommand, CommandInputError, describeCommand, findCommand } from '../domain/catalog';
import { checkRawCommand } from '../domain/raw';
import { overrideOf, overridesOf } from '../store/overrides';
import type { LightDb } from '../store/prisma';
import { statesOf } from '../store/states';

export interface LightDeps {
  db: LightDb;
  publisher: MessagePublisher;
  topicRoot: string;
  logger: Logger;
}

/** Every request subject light-command serves (queue group light-command): those proto-schemas/subjects.json gives it. */
export type LightSubject = SubjectsOf<'light-command'>;
export const LIGHT_SUBJECTS: readonly LightSubject[] = subjectsOf('light-command');

const has = (principal: Principal, permission: Principal['permissions'][number]): boolean => principal.permissions.includes(permission);

function principalOf(req: RequestEnvelope): Principal {
  if (!req.principal) throw new ForbiddenError('This request needs a partner.');
  return req.principal;
}

/** The light the gateway resolved in the partner's scope. */
function lightOf(req: RequestEnvelope): string {
  if (!req.device || req.device.product !== 'light') throw new NotFoundError('Device not found.');
  return req.device.device_id;
}

/** Channel access: a 403 that no permission lifts (so no required_permission). */
function checkChannelAccess(principal: Principal, channel: LightChannel): void {
  if (!principal.allowed_channels.includes(channel)) {
    throw new ForbiddenError(`Your account may not command channel '${channel}'.`);
  }
}

function invalid(err: unknown): never {
  if (err instanceof CommandInputError) throw new ValidationError(err.message);
  throw err;
}

/** light-command's one map of what it serves; the type check fails when a subject lacks its handler. */
export function lightHandlers(deps: LightDeps): ServiceHandlers<LightSubject> {
  const topicOf = (deviceId: string, channel: LightChannel) => commandTopic(deps.topicRoot, deviceId, channel);

  return {
    async 'light.command.catalog'(req) {
      const principal = principalOf(req);
      const available = availableCommands(await overridesOf(deps.db, principal.partner_id));
      const commands = available.map(({ def, bounds }) => describeCommand(def, principal.allowed_channels, bounds));
      return { status: 200, body: { commands } };
    },

    async 'light.command.raw'(req, ctx) {
      const principal = principalOf(req);
      const deviceId = lightOf(req);
      const body = (req.body ?? {}) as { channel?: unknown; payload?: unknown };
      if (!isChannel(body.channel)) throw new ValidationError("'channel' must be one of light1, light2, light3, sound, contact.");
      if (typeof body.payload !== 'string') throw new ValidationError("'payload' must be a string.");
      const channel = body.channel;
      checkChannelAccess(principal, channel);
      try {
        checkRawCommand(channel, body.payload, has(principal, 'relaxed_caps'));
      } catch (err) {
        invalid(err);
      }
      await deps.publisher.publish({ requestId: req.request_id, deadline: ctx.deadline }, { topic: topicOf(deviceId, channel), payload: body.payload });
      return { status: 202, body: { channel, payload: body.payload, command: 'raw' } };
    },

    async 'light.effect.apply'(req, ctx) {
      const principal = principalOf(req);
      const deviceId = lightOf(req);
      const channel = req.params.channel;
      if (!isChannel(channel)) throw new ValidationError("'channel' must be one of light1, light2, light3, sound, contact.");
      checkChannelAccess(principal, channel);
      const body = (req.body ?? {}) as { command?: unknown; params?: unknown };
      if (typeof body.command !== 'string') throw new ValidationError("'command' must be a string.");
      const def = findCommand(body.command);
      if (!def) throw new ValidationError(`Unknown command '${body.command}'; GET /v1/commands lists the commands your account may use.`);
      // Every catalog command is the partner's unless staff withdrew it: a 403 no permission lifts.
      const override = await overrideOf(deps.db, principal.partner_id, def.name);
      if (override?.withdrawn) throw new ForbiddenError(`Your account may not use the command '${def.name}'.`);
      const params = body.params ?? {};
      if (params === null || typeof params !== 'object' || Array.isArray(params)) throw new ValidationError("'params' must be an object.");
      let payload: string;
      try {
        payload = encodePayload(buildCommand(def, channel, params as Record<string, unknown>, override?.bounds ?? {}));
      } catch (err) {
        invalid(err);
      }
      await deps.publisher.publish({ requestId: req.request_id, deadline: ctx.deadline }, { topic: topicOf(deviceId, channel), payload });
      return {
        status: 202,
        body: { channel, command: def.name, ...(has(principal, 'raw_commands') ? { payload } : {}) },
      };
    },

    // The automation writer: config-alerting shows an alert signal's entry on light1, and only
    // there. The payload is checked as a raw command without relaxed caps (signals never exceed them).
    async 'light.automation.write'({ body, request_id: requestId }, ctx) {
      try {
        checkRawCommand('light1', body.payload, false);
      } catch (err) {
        invalid(err);
      }
      const sent = await deps.publisher.publish({ requestId, deadline: ctx.deadline }, { topic: topicOf(body.device_id, 'light1'), payload: body.payload });
      return { body: { device_id: body.device_id, channel: 'light1', payload: sent.payload, sent_at: sent.sent_at } };
    },

    async 'light.state.get'(req) {
      const principal = principalOf(req);
      const deviceId = lightOf(req);
      const withPayload = has(principal, 'raw_commands');
      const state: Record<string, Record<string, string>> = {};
      for (const s of await statesOf(deps.db, deviceId)) {
        if (!isChannel(s.channel) || !principal.allowed_channels.includes(s.channel)) continue;
        state[s.channel] = {
          label: stateLabel(s.channel, s.payload),
          updated_at: s.updatedAt.toISOString(),
          ...(withPayload ? { payload: s.payload } : {}),
        };
      }
      return { status: 200, body: { device_id: deviceId, state } };
    },
  };
}

export function serveLight(bus: Bus, deps: LightDeps): void {
  bus.serveAll(lightHandlers(deps));
}
