import type { RegistryTx } from './prisma';

export interface TelemetryRow {
  deviceId: string;
  createdAt: Date;
  topic: string;
  payload: string;
}

/**
 * Stores a batch of telemetry in one statement. Rows of unknown devices are skipped, as are rows
 * received before the device's record was created (an earlier device with the id, removed since:
 * domain/connectivity effectSince), and a row already stored (a redelivery: same device, topic
 * and receive time) is stored once.
 */
export async function insertTelemetry(db: RegistryTx, rows: readonly TelemetryRow[]): Promise<number> {
  if (rows.length === 0) return 0;
  return db.$executeRaw`
    INSERT INTO telemetry (device_id, created_at, topic, payload)
    SELECT t.device_id, t.created_at, t.topic, t.payload
    FROM unnest(${rows.map((r) => r.deviceId)}::text[], ${rows.map((r) => r.createdAt.toISOString())}::timestamptz[],
                ${rows.map((r) => r.topic)}::text[], ${rows.map((r) => r.payload)}::text[]) AS t(device_id, created_at, topic, payload)
    WHERE EXISTS (SELECT 1 FROM devices d WHERE d.device_id = t.device_id AND d.created_at <= t.created_at)
    ON CONFLICT (device_id, topic, created_at) DO NOTHING`;
}

/** A device's telemetry since `since`, newest first. */
export async function recentTelemetry(db: RegistryTx, deviceId: string, since: Date, limit: number): Promise<TelemetryRow[]> {
  const rows = await db.telemetry.findMany({
    where: { deviceId, createdAt: { gte: since } },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: limit,
  });
  return rows.map((r) => ({ deviceId: r.deviceId, createdAt: r.createdAt, topic: r.topic, payload: r.payload }));
}

/** Deletes rows older than the retention; returns how many. */
export async function purgeTelemetry(db: RegistryTx, olderThan: Date): Promise<number> {
  return (await db.telemetry.deleteMany({ where: { createdAt: { lt: olderThan } } })).count;
}
