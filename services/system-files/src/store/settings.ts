import type { SystemDb, SystemTx } from './prisma';

export interface StoredSettings {
  settings: Record<string, unknown>;
  receivedAt: Date;
}

/** The settings a device last reported, or null when it never did. */
export async function readSettings(db: SystemDb | SystemTx, deviceId: string): Promise<StoredSettings | null> {
  const row = await db.settingsSnapshot.findUnique({ where: { deviceId } });
  return row ? { settings: row.settings as Record<string, unknown>, receivedAt: row.receivedAt } : null;
}

/** Keeps a device's reported settings unless a newer report is stored already (redeliveries arrive late). */
export async function saveSettings(db: SystemDb | SystemTx, deviceId: string, settings: Record<string, unknown>, receivedAt: Date): Promise<void> {
  await db.$executeRaw`
    INSERT INTO settings_snapshots (device_id, settings, received_at)
    VALUES (${deviceId}, ${JSON.stringify(settings)}::jsonb, ${receivedAt})
    ON CONFLICT (device_id) DO UPDATE SET settings = EXCLUDED.settings, received_at = EXCLUDED.received_at
    WHERE settings_snapshots.received_at <= EXCLUDED.received_at`;
}
