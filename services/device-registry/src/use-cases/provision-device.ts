/**
 * Provisioning a device: a saga of two steps and one compensation.
 *
 *   plan        read-only: the request parsed, the org node, the credentials derived and the
 *               broker password hashed
 *   step 1      under the device id's lock, the id is free: the record with its broker password
 *               hash and its `provisioned` event (the outbox) are inserted, and the broker
 *               credential is set (with Mosquitto's dynamic security; nothing to do where the
 *               broker asks the hook)
 *   step 2      the transaction commits, only until the request's deadline
 *   compensate  step 2 did not commit (deadline, database, conflict): the credential is taken
 *               back, unless a provisioning of the same id committed meanwhile
 *
 * So a 503 leaves nothing behind, and a 201 means the broker and the record both hold the device.
 */
import type { Principal } from '@fleet/contracts';
import { statementBy, transactionBy, type CommitWindow } from '@fleet/db';
import type { BrokerCredentials } from '@fleet/bridge-client';
import { ApiError, ConflictError, ServiceUnavailableError, isDeadlineExceeded, partnerOutboxEntry, type HandlerResult, type Logger } from '@fleet/service-kit';
import { hashBrokerPassword } from '../domain/broker-password';
import { deriveBrokerPassword, deriveSettingsKey, encryptSettingsKey, generateRootSecret } from '../domain/crypto';
import { CREDENTIAL_FORMAT, parseProvisionBody, placeDevice, type ProvisionRequest } from '../domain/provision';
import { scopeOf, subtreeIds } from '../domain/scope';
import { insertDeviceWithEvents, lockDeviceId, type NewDevice } from '../store/devices';
import { allOrgNodes, orgNodesNamed } from '../store/orgs';
import { outboxPayload } from '../store/outbox';
import type { RegistryDb } from '../store/prisma';

export interface ProvisionDeps {
  db: RegistryDb;
  broker: BrokerCredentials;
  /**
   * False where the broker reads credentials through the hook: the record is then the whole
   * credential, and provisioning is one statement that commits on its own (no broker step, so
   * nothing to compensate). Default true: Mosquitto's dynamic security, the saga below.
   */
  brokerKeepsCredentials?: boolean;
  /** Encrypts the settings key at rest. */
  kek: Buffer;
  now: () => Date;
}

/** Everything provisioning will store, decided before anything is changed. */
export interface ProvisionPlan {
  request: ProvisionRequest;
  orgNodeId: number;
  /** The root secret when the platform generated it (answered once, never stored). */
  generatedRootSecret?: string;
  brokerPassword: string;
  brokerPasswordHash: string;
  settingsKeyCiphertext: string | null;
}

/** The request's own time: its id, its commit window (deadline and commit notice), its logger. */
export interface ProvisionCall {
  requestId: string;
  window: CommitWindow;
  logger: Logger;
}

/** Parses the request, places the device in the caller's scope and derives its credentials. */
export async function planProvisioning(deps: ProvisionDeps, principal: Principal | undefined, deviceId: string, body: Record<string, unknown> | undefined): Promise<ProvisionPlan> {
  const request = parseProvisionBody(deviceId, body);
  const scope = scopeOf(principal);
  let candidates = request.org === undefined ? [] : await orgNodesNamed(deps.db, request.org);
  if (!scope.all && candidates.length > 0) {
    const visible = subtreeIds(await allOrgNodes(deps.db), scope.grants);
    candidates = candidates.filter((c) => visible.has(c.id));
  }
  const orgNodeId = placeDevice(request.org, scope.all, candidates);

  const rootSecret = request.source === 'generate' ? generateRootSecret() : request.rootSecret;
  const brokerPassword = rootSecret !== undefined ? deriveBrokerPassword(rootSecret, request.deviceId, request.product) : (request.mqttPassword as string);
  const settingsKeyCiphertext =
    rootSecret !== undefined ? encryptSettingsKey(deps.kek, request.deviceId, deriveSettingsKey(rootSecret, request.deviceId, request.product)) : null;
  const brokerPasswordHash = await hashBrokerPassword(brokerPassword);
  return { request, orgNodeId, brokerPassword, brokerPasswordHash, settingsKeyCiphertext, ...(request.source === 'generate' ? { generatedRootSecret: rootSecret } : {}) };
}

/** Carries out the plan (steps 1 and 2, or the compensation). Throws 409 conflict or 503; nothing is left behind then. */
export async function provisionDevice(deps: ProvisionDeps, plan: ProvisionPlan, call: ProvisionCall): Promise<void> {
  if (deps.brokerKeepsCredentials === false) return insertRecordAlone(deps, plan, call);
  const { request } = plan;
  let credentialSet = false;
  try {
    await transactionBy(
      deps.db,
      call.window,
      async (tx) => {
        // The record and its `provisioned` event, under the id's lock; nothing when the id is taken.
        const inserted = await insertDeviceWithEvents(tx, newDevice(plan), provisionedEvents(deps, plan));
        if (!inserted) throw new ConflictError(`Device id ${request.deviceId} is already in use.`, 'conflict');
        // Step 1. From here the broker may hold the credential even when the call fails or times out.
        credentialSet = true;
        await deps.broker.setCredential(
          { requestId: call.requestId, deadline: call.window.deadline },
          { device_id: request.deviceId, product: request.product, password: plan.brokerPassword },
        );
        // Step 2: committed by transactionBy only until the deadline.
      },
      { timeout: 15_000, maxWait: 5_000 },
    );
  } catch (err) {
    if (!credentialSet) throw err;
    if (isDeadlineExceeded(err)) call.logger.warn({ device_id: request.deviceId }, 'provisioning missed its deadline; removing the broker credential');
    else call.logger.error({ err, device_id: request.deviceId }, 'provisioning failed after the broker call; removing the broker credential');
    await withdrawCredential(deps, call.requestId, request.deviceId, call.logger);
    if (err instanceof ApiError && err.code === 'broker_unavailable') throw err;
    throw new ServiceUnavailableError('Provisioning could not be completed; nothing was stored. Retry shortly.');
  }
}

/** Where the broker asks the hook: the record (its hash the credential) and its event in one statement, only until the deadline. */
async function insertRecordAlone(deps: ProvisionDeps, plan: ProvisionPlan, call: ProvisionCall): Promise<void> {
  const inserted = await statementBy(deps.db, call.window, (guard) => insertDeviceWithEvents(deps.db, newDevice(plan), provisionedEvents(deps, plan), guard));
  if (!inserted) throw new ConflictError(`Device id ${plan.request.deviceId} is already in use.`, 'conflict');
}

function newDevice(plan: ProvisionPlan): NewDevice {
  const { request } = plan;
  return {
    deviceId: request.deviceId,
    product: request.product,
    name: request.name ?? null,
    orgNodeId: plan.orgNodeId,
    credentialSource: request.source,
    settingsKeyCiphertext: plan.settingsKeyCiphertext,
    brokerPasswordHash: plan.brokerPasswordHash,
  };
}

/** The registry's own event and the partners' device.provisioned, stored with the record. */
function provisionedEvents(deps: ProvisionDeps, plan: ProvisionPlan): Array<{ subject: string; payload: unknown }> {
  const at = deps.now();
  const { deviceId, product, name } = plan.request;
  return [
    outboxPayload('evt.registry.device.changed.v1', { device_id: deviceId, change: 'provisioned', at: at.toISOString() }),
    partnerOutboxEntry('device.provisioned', { deviceId, occurredAt: at, data: { product, name: name ?? null, org_node_id: plan.orgNodeId }, orgNodeIds: [plan.orgNodeId] }),
  ];
}

/** The 201 answer: the generated root secret is shown here and never again. */
export function provisionedAnswer(plan: ProvisionPlan): HandlerResult {
  const { request } = plan;
  const body: Record<string, unknown> = { device_id: request.deviceId, credential_format: CREDENTIAL_FORMAT, product: request.product };
  if (plan.generatedRootSecret !== undefined) body.password = plan.generatedRootSecret;
  if (request.name !== undefined) body.name = request.name;
  if (request.org !== undefined) body.org = request.org;
  return { status: 201, headers: { Location: `/v1/devices/${request.deviceId}` }, body };
}

/**
 * The compensation: takes back the broker credential of a provisioning that did not commit.
 * Under the device id's lock, and only while no record holds the id: a provisioning of the same
 * id that committed meanwhile (a retry) owns the credential now. A cleanup, not the request's
 * work: it runs on the bridge client's own timeout, after the request's deadline too.
 */
async function withdrawCredential(deps: ProvisionDeps, requestId: string, deviceId: string, log: Logger): Promise<void> {
  try {
    await deps.db.$transaction(
      async (tx) => {
        await lockDeviceId(tx, deviceId);
        if (await tx.device.findUnique({ where: { deviceId }, select: { deviceId: true } })) {
          log.warn({ device_id: deviceId }, 'a record holds the id now; its broker credential is kept');
          return;
        }
        await deps.broker.removeCredential({ requestId }, deviceId);
      },
      { timeout: 15_000, maxWait: 5_000 },
    );
  } catch (err) {
    if (err instanceof ApiError) {
      log.error({ err, device_id: deviceId }, 'could not remove the broker credential');
      return;
    }
    // The database is out of reach, so nothing can commit for this id either: remove anyway.
    log.error({ err, device_id: deviceId }, 'device lock unavailable; removing the broker credential without it');
    await deps.broker.removeCredential({ requestId }, deviceId).catch((e: unknown) => log.error({ err: e, device_id: deviceId }, 'could not remove the broker credential'));
  }
}
