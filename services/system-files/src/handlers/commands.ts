import { commandTier, settingDef, settingTier } from '@fleet/contracts';
import { sysExeTopic } from '@fleet/device-protocol';
import { ValidationError, type HandlerContext, type HandlerResult, type RequestOf } from '@fleet/service-kit';
import { checkConfirm, commandLine, settingLine, type DeviceRef } from '../use-cases/command-line';
import type { SystemDeps } from './deps';

/** The device the gateway resolved within the partner's scope. */
export function deviceOf(req: { device?: { device_id: string; product: string | null } }): DeviceRef {
  const device = req.device;
  if (!device || (device.product !== 'light' && device.product !== 'meter')) throw new ValidationError('This route needs a light or a meter.');
  return { deviceId: device.device_id, product: device.product };
}

/**
 * Publishes a line on the device's sys/exe (QoS 2 by the protocol): 202 with exactly what the
 * broker took. The line is never logged: it may hold a sealed secret.
 */
async function publishLine(deps: SystemDeps, req: { request_id: string; deadline?: number }, device: DeviceRef, line: string) {
  const call = { requestId: req.request_id, deadline: req.deadline };
  return deps.bridge.publish(call, { topic: sysExeTopic(deps.roots[device.product], device.deviceId), payload: line });
}

/** POST /v1/devices/{device_id}/system/commands. */
export async function sendCommand(deps: SystemDeps, req: RequestOf<'system.command.send'>, _ctx: HandlerContext): Promise<HandlerResult> {
  const device = deviceOf(req);
  const body = (req.body ?? {}) as { command?: unknown; params?: Record<string, unknown>; confirm?: unknown };
  if (typeof body.command !== 'string') throw new ValidationError("'command' is required");
  const call = { requestId: req.request_id, deadline: req.deadline };
  // Confirm first: a destructive request without it costs nothing (no file lookup, no sealing).
  const tier = commandTier(body.command, body.params);
  if (tier) checkConfirm(tier, device, body.confirm);
  const built = await commandLine(deps, call, device, body.command, body.params ?? {});
  checkConfirm(built.tier, device, body.confirm);
  const sent = await publishLine(deps, req, device, built.line);
  const key = body.command === 'set' ? { key: String(body.params?.key) } : {};
  return { status: 202, body: { ...sent, command: built.command, ...key } };
}

/** PUT /v1/devices/{device_id}/system/settings/{key}. */
export async function writeSetting(deps: SystemDeps, req: RequestOf<'system.settings.put'>, _ctx: HandlerContext): Promise<HandlerResult> {
  const device = deviceOf(req);
  const key = req.params.key ?? '';
  const body = (req.body ?? {}) as { value?: unknown; confirm?: unknown };
  const call = { requestId: req.request_id, deadline: req.deadline };
  if (settingDef(key)) checkConfirm(settingTier(key), device, body.confirm);
  const built = await settingLine(deps, call, device, key, body.value);
  checkConfirm(built.tier, device, body.confirm);
  const sent = await publishLine(deps, req, device, built.line);
  return { status: 202, body: { ...sent, command: 'set', key } };
}
