import { subjectsOf, type DeviceChangedEvent, type PartnerEventFields, type PartnerEventType, type Principal, type RequestEnvelope, type SubjectsOf } from '@fleet/contracts';
import { transactionBy, type CommitWindow } from '@fleet/db';
import {
  ConflictError,
  NotFoundError,
  ServiceUnavailableError,
  ValidationError,
  isDeadlineExceeded,
  recordPartnerEvent,
  type Bus,
  type Logger,
  type ServiceHandlers,
} from '@fleet/service-kit';
import { decryptSettingsKey, sealSetting } from '../domain/crypto';
import {
  connectivityOf,
  deviceSummary,
  deviceView,
  HEALTH_HOURS_DEFAULT,
  HEALTH_HOURS_MAX,
  HEALTH_LIMIT_DEFAULT,
  HEALTH_LIMIT_MAX,
  type DeviceRecord,
} from '../domain/device-view';
import { isDeviceId, isProduct, NAME_MAX, nameLength } from '../domain/products';
import { orgForest, orgPaths, resolveMoveTarget, scopeOf } from '../domain/scope';
import {
  deleteDevice,
  describeDevices,
  findDevice,
  findDeviceInScope,
  listDevicesInScope,
  moveDevice,
  renameDevice,
  setAutomation,
} from '../store/devices';
import { allOrgNodes } from '../store/orgs';
import { recordEvent } from '../store/outbox';
import type { RegistryDb, RegistryTx } from '../store/prisma';
import { recentTelemetry } from '../store/telemetry';
import { planProvisioning, provisionDevice, provisionedAnswer } from '../use-cases/provision-device';
import type { RecentConnectivity } from './recent-connectivity';
import type { RegistryBroker } from '../broker/hook-credentials';

export interface RegistryDeps {
  db: RegistryDb;
  broker: RegistryBroker;
  /** False where the broker reads credentials through the hook (BROKER_CREDENTIALS=hook); default true. */
  brokerKeepsCredentials?: boolean;
  /** Encrypts settings keys at rest. */
  kek: Buffer;
  logger: Logger;
  now?: () => Date;
  /**
   * The process's outbox relay, woken after each committed change so its event goes out at
   * once; without one, events wait in the outbox for a relay's next poll.
   */
  relay?: { wake(withinMs?: number): Promise<void> };
  /**
   * The bridges' connectivity batches heard before the durable consumer stored them, laid over
   * every read of a device's connectivity; without it, reads show the stored state only.
   */
  recent?: Pick<RecentConnectivity, 'overlay' | 'whenConnected'>;
}

/** Every request subject the registry serves (queue group device-registry): those proto-schemas/subjects.json gives it. */
export type RegistrySubject = SubjectsOf<'device-registry'>;
export const REGISTRY_SUBJECTS: readonly RegistrySubject[] = subjectsOf('device-registry');

const bodyOf = (req: RequestEnvelope): Record<string, unknown> => (req.body ?? {}) as Record<string, unknown>;
const queryOf = (req: RequestEnvelope): Record<string, unknown> => req.query as Record<string, unknown>;

/** The device the request names: the resolved summary's id, else the path parameter. */
function deviceIdOf(req: RequestEnvelope): string {
  const id = req.device?.device_id ?? req.params.device_id;
  if (!isDeviceId(id)) throw new NotFoundError('Device not found.');
  return id;
}

function integerParam(value: unknown, name: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  const n = typeof value === 'string' && /^-?\d+$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
    throw new ValidationError(`invalid '${name}': must be a whole number from ${min} to ${max}`);
  }
  return n;
}

/**
 * How long a committed change waits for its event to be relayed before answering: at most a
 * second, and never into the last 200 ms before the request's deadline (the change is
 * committed; the event then goes out with the relay's next pass).
 */
function relayWaitMs(window: { deadline: number }): number {
  return Math.max(0, Math.min(1_000, window.deadline - Date.now() - 200));
}

/** The registry's one map of what it serves; the type check fails when a subject lacks its handler. */
export function registryHandlers(deps: RegistryDeps): ServiceHandlers<RegistrySubject> {
  const { db, broker, kek, relay } = deps;
  const live = <T extends DeviceRecord>(device: T): T => deps.recent?.overlay(device) ?? device;
  const now = deps.now ?? (() => new Date());
  const provisioning = { db, broker, kek, now, brokerKeepsCredentials: deps.brokerKeepsCredentials ?? true };

  /**
   * Commits `apply` and the event announcing it in one transaction; false, nothing stored, when
   * `apply` found no device. The event is written after `apply`, which locks the device's row,
   * so a device's events get outbox ids (the publishing order) in the order of their commits.
   */
  async function changeDevice(
    window: CommitWindow,
    deviceId: string,
    change: DeviceChangedEvent['change'],
    apply: (tx: RegistryTx) => Promise<boolean>,
    partnerEvent?: { type: PartnerEventType } & Omit<PartnerEventFields, 'deviceId'>,
  ): Promise<boolean> {
    const applied = await transactionBy(db, window, async (tx) => {
      if (!(await apply(tx))) return false;
      // `at` is the change's time, not the publish's: consumers forget only what predates a removal.
      const at = now();
      await recordEvent(tx, 'evt.registry.device.changed.v1', { device_id: deviceId, change, at: at.toISOString() });
      if (partnerEvent) await recordPartnerEvent(tx, partnerEvent.type, { ...partnerEvent, deviceId, occurredAt: at });
      return true;
    });
    if (applied) await relay?.wake(relayWaitMs(window));
    return applied;
  }

  /** The named device within the caller's scope, read afresh (the envelope's summary may be cached). */
  async function inScope(req: RequestEnvelope): Promise<DeviceRecord> {
    const device = await findDeviceInScope(db, deviceIdOf(req), scopeOf(req.principal));
    if (!device) throw new NotFoundError('Device not found.');
    return live(device);
  }

  return {
    'registry.scope.resolve': async (req) => {
      const id = req.params.device_id;
      if (!isDeviceId(id)) throw new NotFoundError('Device not found.');
      const device = await findDeviceInScope(db, id, scopeOf(req.principal));
      if (!device) throw new NotFoundError('Device not found.');
      return { body: deviceSummary(device) };
    },

    'registry.device.list': async (req) => {
      const product = queryOf(req).product;
      if (product !== undefined && !isProduct(product)) throw new ValidationError("invalid 'product': must be 'light' or 'meter'");
      const devices = await listDevicesInScope(db, scopeOf(req.principal), product ?? null);
      return { body: { devices: devices.map((d) => deviceView(live(d), req.principal)) } };
    },

    'registry.device.get': async (req) => ({ body: deviceView(await inScope(req), req.principal) }),

    'registry.device.provision': async (req, ctx) => {
      const plan = await planProvisioning(provisioning, req.principal as Principal | undefined, req.params.device_id ?? '', req.body as Record<string, unknown> | undefined);
      await provisionDevice(provisioning, plan, { requestId: req.request_id, window: ctx, logger: ctx.logger });
      await relay?.wake(relayWaitMs(ctx));
      return provisionedAnswer(plan);
    },

    'registry.device.remove': async (req, ctx) => {
      const device = await inScope(req);
      const confirm = bodyOf(req).confirm ?? queryOf(req).confirm;
      if (confirm !== device.deviceId) {
        throw new ConflictError('Removal needs `confirm` equal to the device id.', 'confirmation_required');
      }
      // Cut the broker credential first (it disconnects the device); if that fails the record stays.
      await broker.removeCredential({ requestId: req.request_id, deadline: ctx.deadline }, device.deviceId);
      try {
        // False when a removal racing this one deleted the device first (and announced it): 204 all the same.
        await changeDevice(ctx, device.deviceId, 'removed', (tx) => deleteDevice(tx, device.deviceId), {
          type: 'device.removed',
          data: { product: device.product, org_node_id: device.orgNodeId },
          orgNodeIds: [device.orgNodeId],
        });
      } catch (err) {
        if (!isDeadlineExceeded(err)) throw err;
        throw new ServiceUnavailableError('The removal ran out of time; the device record is kept and its broker credential is cut. Retry the removal.');
      }
      // Where the broker asks the hook, the record was the credential: now the connection goes too.
      // The device can no longer connect either way, so a broker out of reach does not undo the removal.
      if (isProduct(device.product)) await broker.cutOff?.(device.deviceId, device.product).catch((err: unknown) => ctx.logger.warn({ err, device_id: device.deviceId }, 'could not cut the removed device off the broker'));
      return { status: 204 };
    },

    'registry.device.health': async (req) => {
      const device = await inScope(req);
      const q = queryOf(req);
      const hours = integerParam(q.hours, 'hours', 1, HEALTH_HOURS_MAX, HEALTH_HOURS_DEFAULT);
      const limit = integerParam(q.limit, 'limit', 1, HEALTH_LIMIT_MAX, HEALTH_LIMIT_DEFAULT);
      const rows = await recentTelemetry(db, device.deviceId, new Date(now().getTime() - hours * 3_600_000), limit);
      return {
        body: {
          device_id: device.deviceId,
          ...connectivityOf(device),
          telemetry: rows.map((r) => ({ created_at: r.createdAt.toISOString(), topic: r.topic, payload: r.payload })),
        },
      };
    },

    'registry.device.rename': async (req, ctx) => {
      const device = await inScope(req);
      const name = bodyOf(req).name;
      if (typeof name !== 'string' || nameLength(name) < 1 || nameLength(name) > NAME_MAX) {
        throw new ValidationError(`invalid 'name': must be a string of 1 to ${NAME_MAX} characters`);
      }
      if (!(await changeDevice(ctx, device.deviceId, 'updated', (tx) => renameDevice(tx, device.deviceId, name)))) throw new NotFoundError('Device not found.');
      return { status: 204 };
    },

    'registry.device.move': async (req, ctx) => {
      const device = await inScope(req);
      const body = bodyOf(req);
      if (!('org_node_id' in body)) throw new ValidationError("missing required field 'org_node_id'");
      const target = body.org_node_id;
      if (target !== null && !(typeof target === 'number' && Number.isInteger(target))) {
        throw new ValidationError("invalid 'org_node_id': must be an integer or null");
      }
      const nodeId = resolveMoveTarget(await allOrgNodes(db), scopeOf(req.principal), target);
      if (!(await changeDevice(ctx, device.deviceId, 'moved', (tx) => moveDevice(tx, device.deviceId, nodeId), {
          type: 'device.moved',
          data: { from_org_node_id: device.orgNodeId, to_org_node_id: nodeId },
          orgNodeIds: [device.orgNodeId, nodeId],
        }))) throw new NotFoundError('Device not found.');
      return { status: 204 };
    },

    'registry.device.automation': async (req, ctx) => {
      const device = await inScope(req);
      if (device.product !== 'light') throw new NotFoundError('Device not found.');
      const enabled = bodyOf(req).enabled;
      if (typeof enabled !== 'boolean') throw new ValidationError("invalid 'enabled': must be a boolean");
      if (!(await changeDevice(ctx, device.deviceId, 'updated', (tx) => setAutomation(tx, device.deviceId, enabled)))) throw new NotFoundError('Device not found.');
      return { body: { device_id: device.deviceId, automation_enabled: enabled } };
    },

    'registry.org.tree': async (req) => ({ body: { nodes: orgForest(await allOrgNodes(db), scopeOf(req.principal)) } }),

    // The bus checked the bodies of these two against their schemas (proto-schemas/registry/).
    'registry.device.connectivity': async ({ body }) => {
      const device = await findDevice(db, body.device_id);
      if (!device) throw new NotFoundError('Device not found.');
      const waitMs = body.wait_for_connected_ms ?? 0;
      return { body: connectivityOf(deps.recent ? await deps.recent.whenConnected(device, waitMs) : device) };
    },
    'registry.device.lookup': async ({ body }) => ({ body: { devices: await describeDevices(db, [...new Set(body.device_ids)]) } }),
    'registry.org.paths': async ({ body }) => ({ body: { paths: orgPaths(await allOrgNodes(db), body.org_node_ids) } }),
    'registry.settings.seal': async ({ body }) => {
      const { device_id: deviceId, key, value } = body;
      const device = await findDevice(db, deviceId);
      if (!device) throw new NotFoundError('Device not found.');
      if (!device.settingsKeyCiphertext) {
        throw new ConflictError('The platform holds no encryption key for this device; the secret setting cannot be sent.', 'encryption_unavailable');
      }
      const settingsKey = decryptSettingsKey(kek, device.deviceId, device.settingsKeyCiphertext);
      return { body: { value: sealSetting(settingsKey, device.deviceId, key, value) } };
    },
  };
}

/** Serves every registry subject on the bus. */
export function serveRegistry(bus: Bus, deps: RegistryDeps): void {
  bus.serveAll(registryHandlers(deps));
}
