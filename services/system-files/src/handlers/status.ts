/**
 * The status feed of a device: its connectivity (device-registry), the last connection string it
 * published on `<r>/status` (`online`, or `offline` as its last will), and its recent telemetry
 * (`<r>/tele/<kind>`) and heartbeats (`<r>/tele/heartbeat`), newest first, as long as DEVICE_IN
 * keeps them (`history_hours`); of a device id removed before, only what it sent since.
 */
import { levelsAfterDevice } from '@fleet/device-protocol';
import { ValidationError, type HandlerContext, type HandlerResult, type RequestOf } from '@fleet/service-kit';
import { fromHistory, readUntil, type CapturedMessage } from '../history/device-in-history';
import { lastRemoval } from '../store/removals';
import type { SystemDeps } from './deps';

/** Snapshots and heartbeats each, unless asked (at most 500, the gateway checks). */
export const STATUS_DEFAULT_LIMIT = 20;
/** The share of the bus's largest message the snapshots of one answer may take. */
const SNAPSHOT_SHARE = 0.5;

/** The kind of a `<root>/<id>/tele/<kind>` topic (a root of any depth). */
function teleKind(m: CapturedMessage, deviceId: string): string | undefined {
  const levels = levelsAfterDevice(m.topic, deviceId);
  return levels?.length === 2 && levels[0] === 'tele' ? levels[1] : undefined;
}

/** Telemetry is JSON; anything else is kept as the text it is. */
function dataOf(payload: string): unknown {
  try {
    return JSON.parse(payload) as unknown;
  } catch {
    return payload;
  }
}

const numberOrNull = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null);

function snapshotView(m: CapturedMessage, deviceId: string): Record<string, unknown> {
  return { kind: teleKind(m, deviceId), data: dataOf(m.payload), received_at: m.receivedAt };
}

function heartbeatView(m: CapturedMessage): Record<string, unknown> {
  const data = dataOf(m.payload);
  const fields = data !== null && typeof data === 'object' ? (data as Record<string, unknown>) : {};
  return { uptime_s: numberOrNull(fields.uptime_s), rssi_dbm: numberOrNull(fields.rssi_dbm), heap_free: numberOrNull(fields.heap_free), received_at: m.receivedAt };
}

/**
 * Every part's outcome, or the first part's failure once every part has settled: no read goes
 * on after the answer.
 */
async function allOrFirstError<T extends readonly unknown[]>(parts: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const settled = await Promise.allSettled(parts);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** GET /v1/devices/{device_id}/system/status?limit=. */
export async function deviceStatus(deps: SystemDeps, req: RequestOf<'system.status.get'>, ctx: HandlerContext): Promise<HandlerResult> {
  const device = req.device;
  if (!device || (device.product !== 'light' && device.product !== 'meter')) throw new ValidationError('This route needs a light or a meter.');
  const query = req.query as { limit?: number | string };
  const limit = query.limit === undefined ? STATUS_DEFAULT_LIMIT : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new ValidationError("'limit' must be an integer from 1 to 500");
  const deviceId = device.device_id;
  const call = { requestId: req.request_id, deadline: ctx.deadline };
  const until = readUntil(ctx);
  // What the device sent: `dev.in.<product>.<id>.<levels>`; of an id removed before, only what
  // came after its last removal (the history still holds the removed device's traffic).
  const base = `dev.in.${device.product}.${deviceId}`;
  const removedAt = (await lastRemoval(deps.db, deviceId))?.getTime() ?? Number.NEGATIVE_INFINITY;
  const sinceRemoval = (m: CapturedMessage): boolean => Date.parse(m.receivedAt) > removedAt;
  const snapshotBytes = Math.floor(deps.history.maxPayload * SNAPSHOT_SHARE);
  const [link, last, snapshots, heartbeats, historyHours] = await allOrFirstError([
    deps.registry.connectivity(call, deviceId),
    fromHistory(ctx, async () => {
      const message = await deps.history.last(`${base}.status`, until);
      return message && sinceRemoval(message) ? message : undefined;
    }),
    fromHistory(ctx, () =>
      deps.history.newest([`${base}.tele.*`], {
        limit,
        until,
        match: (m) => {
          const kind = teleKind(m, deviceId);
          return kind !== undefined && kind !== 'heartbeat' && sinceRemoval(m);
        },
        weigh: (m) => Buffer.byteLength(m.payload, 'utf8') + 100,
        maxWeight: snapshotBytes,
      }),
    ),
    fromHistory(ctx, () => deps.history.newest([`${base}.tele.heartbeat`], { limit, until, match: (m) => teleKind(m, deviceId) === 'heartbeat' && sinceRemoval(m) })),
    fromHistory(ctx, () => deps.history.retentionHours(until)),
  ]);
  return {
    status: 200,
    body: {
      device_id: deviceId,
      status: link.status,
      status_changed_at: link.status_changed_at,
      last_seen_at: link.last_seen_at,
      last_connection: last ? { payload: last.payload, received_at: last.receivedAt } : null,
      snapshots: snapshots.messages.map((m) => snapshotView(m, deviceId)),
      heartbeats: heartbeats.messages.map(heartbeatView),
      history_hours: historyHours,
    },
  };
}
