import type { DeviceBatchEffect } from '../domain/connectivity';
import type { RegistryTx } from './prisma';

/**
 * Applies one batch's per-device effects in one statement (domain/connectivity applyEffect, in
 * SQL). Rows are locked in device-id order first, so concurrent replicas neither deadlock nor
 * compute from stale rows. Unknown device ids match nothing. Returns the number of devices updated.
 */
export async function applyConnectivityEffects(db: RegistryTx, effects: readonly DeviceBatchEffect[]): Promise<number> {
  if (effects.length === 0) return 0;
  const ids = effects.map((e) => e.deviceId);
  const seen = effects.map((e) => (e.seenAt ? e.seenAt.toISOString() : null));
  const offline = effects.map((e) => (e.offlineAt ? e.offlineAt.toISOString() : null));
  return db.$executeRaw`
    WITH b AS (
      SELECT * FROM unnest(${ids}::text[], ${seen}::timestamptz[], ${offline}::timestamptz[]) AS b(device_id, seen_at, offline_at)
    ),
    cur AS (
      SELECT d.device_id, d.status, d.status_changed_at, d.last_seen_at
      FROM devices d JOIN b ON b.device_id = d.device_id
      ORDER BY d.device_id
      FOR UPDATE OF d
    ),
    s1 AS (
      SELECT cur.device_id, b.offline_at,
        GREATEST(cur.last_seen_at, b.seen_at) AS last_seen_at,
        (b.seen_at IS NOT NULL AND cur.status <> 'connected'
          AND (cur.status_changed_at IS NULL OR b.seen_at >= cur.status_changed_at)) AS connects,
        cur.status, cur.status_changed_at, b.seen_at
      FROM cur JOIN b ON b.device_id = cur.device_id
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
    WHERE d.device_id = s3.device_id`;
}

/**
 * The silence sweep (domain/connectivity applySilence): one idempotent statement, safe when
 * several replicas run it. Returns the ids it disconnected.
 */
export async function disconnectSilent(db: RegistryTx, silenceSeconds: number, now: Date = new Date()): Promise<string[]> {
  const rows = await db.$queryRaw<{ device_id: string }[]>`
    UPDATE devices SET
      status = 'disconnected',
      status_changed_at = COALESCE(last_seen_at + make_interval(secs => ${silenceSeconds}::float8), ${now}::timestamptz)
    WHERE status = 'connected'
      AND (last_seen_at IS NULL OR last_seen_at <= ${now}::timestamptz - make_interval(secs => ${silenceSeconds}::float8))
    RETURNING device_id`;
  return rows.map((r) => r.device_id);
}
