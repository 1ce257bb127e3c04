import type { RequestEnvelope } from '@fleet/contracts';
import type { CommitWindow } from '@fleet/db';
import type { MessagePublisher, Published } from '@fleet/bridge-client';
import type { ConnectivityReader } from '@fleet/registry-client';
import { ConflictError, NotFoundError, RateLimitedError, warnIfFails, type HandlerResult, type Logger } from '@fleet/service-kit';
import { isToken, newToken, reportLine, resetLine, SAMPLE_TIMEOUT_S, sampleLine, sysExeTopic } from '../domain/requests';
import type { MeterDb, MeterReader } from '../store/prisma';
import { createReset, createSample, deleteReset, deleteSample, readReset, readSample, releaseSampleSlot, takeSampleSlot } from '../store/requests';
import { meterOf } from './reads';

export interface RequestDeps {
  db: MeterDb;
  /** Where pages by start time, summaries and energy are read: a replica (DATABASE_READ_URL), else the primary. */
  readDb?: MeterReader;
  /** Commands to meters go through mqtt-bridge (sys/exe lines, QoS 2 by the protocol). */
  bridge: MessagePublisher;
  /** A meter's connectivity comes from device-registry. */
  registry: ConnectivityReader;
  topicRoot: string;
  /** Called after a commit that wrote partner events to the outbox (the relay publishes them now rather than at its next poll). */
  onEvents?: () => void;
}

/** A command line to a meter's sys/exe, through the bridge; 503 publish_failed when it did not reach the broker. */
const publish = (deps: RequestDeps, req: RequestEnvelope, topic: string, payload: string): Promise<Published> =>
  deps.bridge.publish({ requestId: req.request_id, deadline: req.deadline }, { topic, payload });


/**
 * A live reading asked of a meter the registry does not yet show connected waits this long for
 * a bridge to report it: the broker acknowledges the meter's first message (its `online`)
 * before a bridge receives it, and a partner acting on that acknowledgement must not be told
 * the meter is offline. A meter that stays silent is refused after it.
 */
const CONNECTED_GRACE_MS = 500;

const location = (deviceId: string, what: 'sample' | 'resetenergy', token: string): string => `/v1/meter/devices/${deviceId}/${what}/${token}`;

export async function sendReport(deps: RequestDeps, req: RequestEnvelope): Promise<HandlerResult> {
  const deviceId = meterOf(req);
  const sent = await publish(deps, req, sysExeTopic(deps.topicRoot, deviceId), reportLine());
  return { status: 202, body: { ...sent, command: 'report' } };
}

export async function requestSample(deps: RequestDeps, req: RequestEnvelope, log: Logger): Promise<HandlerResult> {
  const deviceId = meterOf(req);
  const link = await deps.registry.connectivity({ requestId: req.request_id, deadline: req.deadline }, deviceId, { waitForConnectedMs: CONNECTED_GRACE_MS });
  if (link.status !== 'connected') {
    throw new ConflictError('The meter is not connected; nothing was sent.', 'device_offline', { ...link });
  }
  const slot = await takeSampleSlot(deps.db, deviceId);
  if ('retryAfterS' in slot) throw new RateLimitedError('At most one live reading per meter every 10 seconds; honor Retry-After.', slot.retryAfterS);
  const token = newToken('s');
  await createSample(deps.db, token, deviceId, slot.requestedAt);
  try {
    await publish(deps, req, sysExeTopic(deps.topicRoot, deviceId), sampleLine(token));
  } catch (err) {
    await deleteSample(deps.db, token).catch(warnIfFails(log, 'forgetting the unsent live reading', { token }));
    await releaseSampleSlot(deps.db, deviceId, slot.requestedAt).catch(warnIfFails(log, 'releasing the live reading slot', { device_id: deviceId }));
    throw err;
  }
  return {
    status: 202,
    headers: { Location: location(deviceId, 'sample', token) },
    body: { device_id: deviceId, token, state: 'pending', requested_at: slot.requestedAt.toISOString(), timeout_s: SAMPLE_TIMEOUT_S },
  };
}

/**
 * A live reading's state. Reading one still pending past its deadline settles it no_reply (and
 * writes its event), committed only until the request's deadline (`window`: the handler context).
 */
export async function getSample(deps: RequestDeps, req: RequestEnvelope, window: CommitWindow): Promise<HandlerResult> {
  const deviceId = meterOf(req);
  const token = req.params.token ?? '';
  const found = isToken(token) ? await readSample(deps.db, deviceId, token, window) : null;
  if (!found) throw new NotFoundError('No live reading with that token for this device.');
  if (found.settled) deps.onEvents?.();
  return { body: { ...found.view } };
}

export async function requestReset(deps: RequestDeps, req: RequestEnvelope, log: Logger): Promise<HandlerResult> {
  const deviceId = meterOf(req);
  if ((req.body as { confirm?: unknown } | undefined)?.confirm !== deviceId) {
    throw new ConflictError("An energy reset is irreversible: send 'confirm' equal to the device id.", 'confirmation_required');
  }
  const token = newToken('r');
  const requestedAt = new Date();
  await createReset(deps.db, token, deviceId, requestedAt);
  let sent: Published;
  try {
    sent = await publish(deps, req, sysExeTopic(deps.topicRoot, deviceId), resetLine(token));
  } catch (err) {
    await deleteReset(deps.db, token).catch(warnIfFails(log, 'forgetting the unsent energy reset', { token }));
    throw err;
  }
  return {
    status: 202,
    headers: { Location: location(deviceId, 'resetenergy', token) },
    body: { ...sent, command: 'resetenergy', device_id: deviceId, token, state: 'pending', requested_at: requestedAt.toISOString() },
  };
}

export async function getReset(deps: RequestDeps, req: RequestEnvelope): Promise<HandlerResult> {
  const deviceId = meterOf(req);
  const token = req.params.token ?? '';
  const view = isToken(token) ? await readReset(deps.db, deviceId, token) : null;
  if (!view) throw new NotFoundError('No energy reset with that token for this device.');
  return { body: view };
}

