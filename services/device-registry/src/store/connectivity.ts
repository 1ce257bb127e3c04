import { recordPartnerEvents, type OutboxWriter } from '@fleet/service-kit';
import type { DeviceBatchEffect } from '../domain/connectivity';
import type { RegistryDb, RegistryTx } from './prisma';

/** A device whose connectivity a batch or the silence sweep changed. */
export interface ConnectivityTransition {
  deviceId: string;
  orgNodeId: number;
  /** When it became connected, if it did. */
  connectedAt: Date | null;
  /** When it became disconnected, if it did (after connectedAt when both). */
  disconnectedAt: Date | null;
}

/** The partners' device.connected / device.disconnected events of transitions, in the transaction that made them. */
export async function recordConnectivityEvents(tx: OutboxWriter, transitions: readonly ConnectivityTransition[]): Promise<void> {
  await recordPartnerEvents(
    tx,
    transitions.flatMap((t) => [
      ...(t.connectedAt
        ? [{ type: 'device.connected' as const, deviceId: t.deviceId, occurredAt: t.connectedAt, orgNodeIds: [t.orgNodeId], data: { status: 'connected', status_changed_at: t.connectedAt.toISOString() } }]
        : []),
      ...(t.disconnectedAt
        ? [{ type: 'device.disconnected' as const, deviceId: t.deviceId, occurredAt: t.disconnectedAt, orgNodeIds: [t.orgNodeId], data: { status: 'disconnected', status_changed_at: t.disconnectedAt.toISOString() } }]
        : []),
    ]),
  );
}

/**
 * Applies one batch's per-device effects in one statement (domain/connectivity effectSince then
 * applyEffect, in SQL). Rows are locked in device-id order first, so concurrent replicas neither
 * deadlock nor compute from stale rows. Unknown device ids match nothing, and reports from before
 * a record was created change nothing (a batch of a removed device stored late, after the id was
 * provisioned again). Returns the devices whose status changed.
 */
export async function applyConnectivityEffects(db: RegistryTx, effects: readonly DeviceBatchEffect[]): Promise<ConnectivityTransition[]> {
  if (effects.length === 0) return [];
  const ids = effects.map((e) => e.deviceId);
  const seen = effects.map((e) => (e.seenAt ? e.seenAt.toISOString() : null));
  const offline = effects.map((e) => (e.offlineAt ? e.offlineAt.toISOString() : null));
  const rows = await db.$queryRaw<Array<{ device_id: string; org_node_id: number; connected_at: Date | null; disconnected_at: Date | null }>>`
    WITH b AS (
      SELECT * FROM unnest(${ids}::text[], ${seen}::timestamptz[], ${offline}::timestamptz[]) AS b(device_id, seen_at, offline_at)
    ),
    cur AS (
      SELECT d.device_id, d.status, d.status_changed_at, d.last_seen_at, d.created_at
      FROM devices d JOIN b ON b.device_id = d.device_id
      ORDER BY d.device_id
      FOR UPDATE OF d
    ),
    e AS (
      -- effectSince: reports from before the record was created are of an earlier device with the id.
      SELECT cur.*,
        CASE WHEN b.seen_at >= cur.created_at THEN b.seen_at END AS seen_at,
        CASE WHEN b.offline_at >= cur.created_at THEN b.offline_at END AS offline_at
      FROM cur JOIN b ON b.device_id = cur.device_id
    ),
    s1 AS (
      SELECT e.device_id, e.offline_at,
        GREATEST(e.last_seen_at, e.seen_at) AS last_seen_at,
        (e.seen_at IS NOT NULL AND e.status <> 'connected'
          AND (e.status_changed_at IS NULL OR e.seen_at >= e.status_changed_at)) AS connects,
        e.status, e.status_changed_at, e.seen_at
      FROM e
    ),
    s2 AS (
      SELECT s1.*,
        CASE WHEN s1.connects THEN 'connected' ELSE s1.status END AS status1,
        CASE WHEN s1.connects THEN s1.seen_at ELSE s1.status_changed_at END AS changed1
      FROM s1
    ),
    s3 AS (
      SELECT s2.*,
        (s2.offline_at IS NOT NULL AND s2.status1 = 'connected'
          AND NOT (s2.last_seen_at IS NOT NULL AND s2.last_seen_at > s2.offline_at)) AS disconnects
      FROM s2
    )
    UPDATE devices d SET
      last_seen_at = s3.last_seen_at,
      status = CASE WHEN s3.disconnects THEN 'disconnected' ELSE s3.status1 END,
      status_changed_at = CASE WHEN s3.disconnects THEN s3.offline_at ELSE s3.changed1 END
    FROM s3
    WHERE d.device_id = s3.device_id
    RETURNING d.device_id, d.org_node_id,
      CASE WHEN s3.connects THEN s3.seen_at END AS connected_at,
      CASE WHEN s3.disconnects THEN s3.offline_at END AS disconnected_at`;
  return rows
    .filter((r) => r.connected_at !== null || r.disconnected_at !== null)
    .map((r) => ({ deviceId: r.device_id, orgNodeId: r.org_node_id, connectedAt: r.connected_at, disconnectedAt: r.disconnected_at }));
}

/**
 * The silence sweep (domain/connectivity applySilence): one idempotent statement, safe when
 * several replicas run it, committed with the partners' device.disconnected events. Returns the
 * ids it disconnected.
 */
export async function disconnectSilent(db: RegistryDb, silenceSeconds: number, now: Date = new Date()): Promise<string[]> {
  return db.$transaction(async (tx) => {
    const transitions = await sweepSilent(tx, silenceSeconds, now);
    await recordConnectivityEvents(tx, transitions);
    return transitions.map((t) => t.deviceId);
  });
}

async function sweepSilent(db: RegistryTx, silenceSeconds: number, now: Date): Promise<ConnectivityTransition[]> {
  const rows = await db.$queryRaw<{ device_id: string; org_node_id: number; status_changed_at: Date }[]>`
    UPDATE devices SET
      status = 'disconnected',
      status_changed_at = COALESCE(last_seen_at + make_interval(secs => ${silenceSeconds}::float8), ${now}::timestamptz)
    WHERE status = 'connected'
      AND (last_seen_at IS NULL OR last_seen_at <= ${now}::timestamptz - make_interval(secs => ${silenceSeconds}::float8))
    RETURNING device_id, org_node_id, status_changed_at`;
  return rows.map((r) => ({ deviceId: r.device_id, orgNodeId: r.org_node_id, connectedAt: null, disconnectedAt: r.status_changed_at }));
}
