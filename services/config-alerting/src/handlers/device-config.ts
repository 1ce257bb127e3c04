/**
 * A device's configuration (spec, Configuration): the assembled read, sensor attachments and
 * the light's alert signal. Name, org node and automation come from device-registry at read
 * time, so a rename or move followed by a read shows the new value.
 */
import type { RequestEnvelope } from '@fleet/contracts';
import { transactionBy } from '@fleet/db';
import type { DeviceLookup, RegistryClient } from '@fleet/registry-client';
import { orgNodeInScope, parentVisibleWithoutPath, type OrgNodeView } from '../domain/org-node';
import { ConflictError, NotFoundError, ValidationError, type HandlerContext, type HandlerResult } from '@fleet/service-kit';
import { isSensorId, LABEL_MAX } from '../domain/sensor-id';
import { alertLevelOf, attachSensor, chooseSignal, chosenSignal, detachSensor, isAttached, markForWrite, sensorsOf, updateSensor } from '../store/devices';
import { defaultProfile, holdUsableProfile, holdVisibleSignal, profilesById } from '../store/documents';
import type { ConfigDb, ConfigTx } from '../store/prisma';
import { bodyOf, deviceOf, lightOf, nullableId, onlyFields, principalOf } from './envelope';

export interface DeviceConfigDeps {
  db: ConfigDb;
  registry: DeviceLookup & Pick<RegistryClient, 'orgPaths'>;
}

const callOf = (req: RequestEnvelope, ctx: HandlerContext) => ({ requestId: req.request_id, deadline: ctx.deadline });

function labelOf(value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== 'string' || value.length === 0 || [...value].length > LABEL_MAX) throw new ValidationError(`'label' must be a string of 1 to ${LABEL_MAX} characters, or null`);
  return value;
}

function tdlParam(req: RequestEnvelope): string {
  const tdl = req.params.tdl_id ?? '';
  if (!isSensorId(tdl)) throw new NotFoundError('Sensor not attached.');
  return tdl;
}

/** A profile id the partner may use (global or own), held until the transaction ends; else 404. */
async function usableProfile(tx: ConfigTx, ownerId: string, id: number | null): Promise<void> {
  if (id !== null && !(await holdUsableProfile(tx, ownerId, id))) throw new NotFoundError('Profile not found.');
}

/**
 * The device's org node as the partner's org tree shows it: a parent outside the partner's scope
 * is null there (GET /v1/org-tree nulls each granted root's parent), so it is here too. The
 * node's path is asked only when the node is itself a granted root.
 */
async function scopedOrgNode(deps: DeviceConfigDeps, req: RequestEnvelope, ctx: HandlerContext, node: OrgNodeView | null): Promise<OrgNodeView | null> {
  const principal = principalOf(req);
  if (node === null || parentVisibleWithoutPath(node, principal)) return node;
  const path = (await deps.registry.orgPaths(callOf(req, ctx), [node.id])).get(node.id) ?? [node.id];
  return orgNodeInScope(node, principal, path);
}

/**
 * The configuration read. `alert_level` is the level of the light's last evaluation (null before
 * the first), read as stored, not worked out from the sensors attached now: it is what light1
 * shows and what the last alert.level_changed announced, and a sensor change takes effect at the
 * next cycle as a profile change does (spec, Configuration rule 5). So right after its last sensor
 * is detached, a light evaluated before reads its previous level with `sensors: []`, and a light
 * no cycle has evaluated yet reads null, as right after its first attach; the next cycle judges
 * both NO_SENSORS (store/devices.ts detachSensor keeps the second among the lights it evaluates),
 * writes light1's NO_DATA entry and announces the change, and from then on both read NO_SENSORS.
 */
export async function getConfig(deps: DeviceConfigDeps, req: RequestEnvelope, ctx: HandlerContext): Promise<HandlerResult> {
  const { deviceId } = deviceOf(req);
  const [described] = await deps.registry.lookupDevices(callOf(req, ctx), [deviceId]);
  // Removed between the gateway's scope check and now.
  if (!described) throw new NotFoundError('Device not found.');
  const [sensors, signalId, level, fallback] = await Promise.all([sensorsOf(deps.db, deviceId), chosenSignal(deps.db, deviceId), alertLevelOf(deps.db, deviceId), defaultProfile(deps.db)]);
  const profiles = await profilesById(deps.db, [...new Set(sensors.flatMap((s) => (s.profileId === null ? [] : [s.profileId])))]);
  return {
    body: {
      device_id: deviceId,
      name: described.name,
      org_node: await scopedOrgNode(deps, req, ctx, described.org_node),
      sensors: sensors.map((s) => {
        const p = s.profileId === null ? fallback : (profiles.get(s.profileId) ?? fallback);
        return { tdl_id: s.tdlId, label: s.label, profile: { id: p.id, name: p.name, version: p.version }, profile_id: s.profileId, level: s.level };
      }),
      automation_enabled: described.automation_enabled,
      alert_signal_id: signalId,
      alert_level: level,
    },
  };
}

export async function attach(db: ConfigDb, req: RequestEnvelope, ctx: HandlerContext): Promise<HandlerResult> {
  const ownerId = principalOf(req).partner_id;
  const deviceId = lightOf(req);
  const body = bodyOf(req);
  onlyFields(body, ['tdl_id', 'profile_id', 'label']);
  if (!isSensorId(body.tdl_id)) throw new ValidationError("'tdl_id' must be 1 to 64 letters, digits, '_', '-', '.' or ':'");
  const tdlId = body.tdl_id;
  const profileId = 'profile_id' in body ? nullableId(body.profile_id, 'profile_id') : null;
  const label = 'label' in body ? labelOf(body.label) : null;
  await transactionBy(db, ctx, async (tx) => {
    // The spec's order: a sensor already there is 409 whatever profile the request names.
    const alreadyAttached = () => new ConflictError(`Sensor '${tdlId}' is already attached to this device.`, 'already_attached');
    if (await isAttached(tx, deviceId, tdlId)) throw alreadyAttached();
    await usableProfile(tx, ownerId, profileId);
    if (!(await attachSensor(tx, { deviceId, tdlId, profileId, label }))) throw alreadyAttached();
  });
  return {
    status: 201,
    headers: { Location: `/v1/devices/${deviceId}/sensors/${encodeURIComponent(tdlId)}` },
    body: { device_id: deviceId, tdl_id: tdlId, profile_id: profileId, ...(label !== null ? { label } : {}) },
  };
}

export async function changeSensor(db: ConfigDb, req: RequestEnvelope, ctx: HandlerContext): Promise<HandlerResult> {
  const ownerId = principalOf(req).partner_id;
  const deviceId = lightOf(req);
  const tdlId = tdlParam(req);
  const body = bodyOf(req);
  onlyFields(body, ['profile_id', 'label']);
  if (!('profile_id' in body)) throw new ValidationError("missing required field 'profile_id' (null gives the sensor the Default profile)");
  const profileId = nullableId(body.profile_id, 'profile_id');
  const label = 'label' in body ? labelOf(body.label) : undefined;
  await transactionBy(db, ctx, async (tx) => {
    await usableProfile(tx, ownerId, profileId);
    if (!(await updateSensor(tx, deviceId, tdlId, { profileId, label }))) throw new NotFoundError('Sensor not attached.');
  });
  return { status: 204 };
}

export async function detach(db: ConfigDb, req: RequestEnvelope, ctx: HandlerContext): Promise<HandlerResult> {
  const deviceId = lightOf(req);
  const tdlId = tdlParam(req);
  await transactionBy(db, ctx, async (tx) => {
    if (!(await detachSensor(tx, deviceId, tdlId))) throw new NotFoundError('Sensor not attached.');
  });
  return { status: 204 };
}

export async function setSignal(db: ConfigDb, req: RequestEnvelope, ctx: HandlerContext): Promise<HandlerResult> {
  const ownerId = principalOf(req).partner_id;
  const deviceId = lightOf(req);
  const body = bodyOf(req);
  onlyFields(body, ['alert_signal_id']);
  if (!('alert_signal_id' in body)) throw new ValidationError("missing required field 'alert_signal_id' (null chooses the default signal)");
  const requested = nullableId(body.alert_signal_id, 'alert_signal_id');
  const chosen = await transactionBy(db, ctx, async (tx) => {
    let signalId = requested;
    if (signalId !== null) {
      const signal = await holdVisibleSignal(tx, ownerId, signalId);
      if (!signal) throw new NotFoundError('Alert signal not found.');
      // The default signal's id means the default, as null does.
      if (signal.isDefault) signalId = null;
    }
    await chooseSignal(tx, deviceId, signalId);
    await markForWrite(tx, [deviceId]);
    return signalId;
  });
  return { body: { device_id: deviceId, alert_signal_id: chosen } };
}
