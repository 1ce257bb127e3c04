import type { SystemDb, SystemTx } from './prisma';
import { lockDevice } from './removals';

export interface StoredSettings {
  settings: Record<string, unknown>;
  receivedAt: Date;
}

/** The settings a device last reported, or null when it never did. */
export async function readSettings(db: SystemDb | SystemTx, deviceId: string): Promise<StoredSettings | null> {
  const row = await db.settingsSnapshot.findUnique({ where: { deviceId } });
  return row ? { settings: row.settings as Record<string, unknown>, receivedAt: row.receivedAt } : null;
}

/**
 * Keeps a device's reported settings unless a newer report is stored already (redeliveries
 * arrive late) or the device id was removed after this report was received (a removed device's
 * late report must not reach a device provisioned again under its id). Under the device's lock,
 * so a removal in progress either forgets this report or is seen by it. Returns whether it was kept.
 */
export async function saveSettings(db: SystemDb, deviceId: string, settings: Record<string, unknown>, receivedAt: Date): Promise<boolean> {
  return db.$transaction(async (tx) => {
    await lockDevice(tx, deviceId);
    const kept = await tx.$executeRaw`
      INSERT INTO settings_snapshots (device_id, settings, received_at)
      SELECT ${deviceId}, ${JSON.stringify(settings)}::jsonb, ${receivedAt}
      WHERE NOT EXISTS (SELECT 1 FROM device_removals WHERE device_id = ${deviceId} AND removed_at >= ${receivedAt})
      ON CONFLICT (device_id) DO UPDATE SET settings = EXCLUDED.settings, received_at = EXCLUDED.received_at
      WHERE settings_snapshots.received_at <= EXCLUDED.received_at`;
    return kept > 0;
  });
}
