import type { Reading } from '../domain/reading';
import type { ConfigTx } from './prisma';

/**
 * Stores the readings in one statement; a reading already stored (same device, sensor and time)
 * is left as is. The rows travel as one JSON parameter: binding seven arrays costs the client
 * about as much again as the insert itself (bench/README.md, alerting).
 */
export async function storeReadings(db: ConfigTx, readings: Reading[]): Promise<number> {
  if (readings.length === 0) return 0;
  const rows = JSON.stringify(
    readings.map((r) => ({ device_id: r.deviceId, tdl_id: r.tdlId, at: r.at, temp_c: r.tempC, humidity: r.humidity, breach: r.breach, received_at: r.receivedAt })),
  );
  return db.$executeRaw`
    INSERT INTO readings (device_id, tdl_id, at, temp_c, humidity, breach, received_at)
    SELECT device_id, tdl_id, at, temp_c, humidity, breach, received_at
    FROM json_to_recordset(${rows}::json) AS x(device_id text, tdl_id text, at timestamptz, temp_c float8, humidity float8, breach boolean, received_at timestamptz)
    ON CONFLICT (device_id, tdl_id, at) DO NOTHING`;
}

/**
 * Drops readings older than the retention, except each sensor's newest: a sensor silent longer
 * than the retention still has its last reading, so it stays STALE_DATA (its newest age keeps
 * growing) instead of turning into a sensor that never reported (INSUFFICENT_DATA).
 */
export async function pruneReadings(db: ConfigTx, before: Date): Promise<number> {
  return db.$executeRaw`
    DELETE FROM readings r
    WHERE r.at < ${before}
      AND EXISTS (SELECT 1 FROM readings n WHERE n.device_id = r.device_id AND n.tdl_id = r.tdl_id AND n.at > r.at)`;
}
