import { FEED_LOCK_KEY, type SystemDb, type SystemTx } from './prisma';

/**
 * Namespace of the per-device advisory lock (the second key is hashtext(device id)): a removal
 * and a settings report of the same device take it, so a report that raced the removal is
 * either forgotten by it or sees it and is dropped.
 */
const DEVICE_LOCK_SPACE = 72_707_512;

/** Holds the device's advisory lock until the transaction ends. */
export async function lockDevice(tx: SystemTx, deviceId: string): Promise<void> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(${DEVICE_LOCK_SPACE}::int, hashtext(${deviceId}))`;
}

export interface Forgotten {
  settings: number;
  responses: number;
  transfers: number;
}

/**
 * A removed device is forgotten: its cached settings, its response-feed rows and its file
 * transfers from before the removal go, and the removal is recorded (the latest one wins), so
 * traffic of the removed device received up to then is never stored again (a late or redelivered
 * message) nor shown by the status feed. What came after the removal (a device provisioned
 * again under the same id while this event waited) stays. One transaction: it holds the device's
 * lock (against a settings report) and the feed's (against a feed insert, whose next statement
 * then sees the removal).
 */
export async function forgetRemovedDevice(db: SystemDb, deviceId: string, removedAt: Date): Promise<Forgotten> {
  return db.$transaction(async (tx) => {
    await lockDevice(tx, deviceId);
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(${FEED_LOCK_KEY})`;
    await tx.$executeRaw`
      INSERT INTO device_removals (device_id, removed_at) VALUES (${deviceId}, ${removedAt})
      ON CONFLICT (device_id) DO UPDATE SET removed_at = GREATEST(device_removals.removed_at, EXCLUDED.removed_at)`;
    const settings = await tx.$executeRaw`DELETE FROM settings_snapshots WHERE device_id = ${deviceId} AND received_at <= ${removedAt}`;
    const responses = await tx.$executeRaw`DELETE FROM responses WHERE device_id = ${deviceId} AND received_at <= ${removedAt}`;
    const transfers = await tx.$executeRaw`DELETE FROM file_transfers WHERE device_id = ${deviceId} AND created_at <= ${removedAt}`;
    return { settings, responses, transfers };
  });
}

/** When the device id was last removed, or null when it never was. */
export async function lastRemoval(db: SystemDb | SystemTx, deviceId: string): Promise<Date | null> {
  const row = await db.deviceRemoval.findUnique({ where: { deviceId } });
  return row?.removedAt ?? null;
}
