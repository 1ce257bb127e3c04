import type { Reading } from '../domain/reading';
import type { ConfigTx } from './prisma';

/** Stores the readings in one statement; a reading already stored (same device, sensor and time) is left as is. */
export async function storeReadings(db: ConfigTx, readings: Reading[]): Promise<number> {
  if (readings.length === 0) return 0;
  return db.$executeRaw`
    INSERT INTO readings (device_id, tdl_id, at, temp_c, humidity, breach, received_at)
    SELECT * FROM unnest(
      ${readings.map((r) => r.deviceId)}::text[], ${readings.map((r) => r.tdlId)}::text[], ${readings.map((r) => r.at)}::timestamptz[],
      ${readings.map((r) => r.tempC)}::float8[], ${readings.map((r) => r.humidity)}::float8[], ${readings.map((r) => r.breach)}::boolean[],
      ${readings.map((r) => r.receivedAt)}::timestamptz[])
    ON CONFLICT (device_id, tdl_id, at) DO NOTHING`;
}

/** Drops readings older than the retention (nothing evaluates them any more). */
export async function pruneReadings(db: ConfigTx, before: Date): Promise<number> {
  return db.$executeRaw`DELETE FROM readings WHERE at < ${before}`;
}
