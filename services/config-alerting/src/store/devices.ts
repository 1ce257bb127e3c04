/** A light's sensors, its chosen signal and its alert state. */
import type { ConfigTx } from './prisma';

export interface SensorRow {
  deviceId: string;
  tdlId: string;
  profileId: number | null;
  label: string | null;
  level: string | null;
}

export async function sensorsOf(db: ConfigTx, deviceId: string): Promise<SensorRow[]> {
  return db.sensor.findMany({ where: { deviceId }, orderBy: { tdlId: 'asc' }, select: { deviceId: true, tdlId: true, profileId: true, label: true, level: true } });
}

/**
 * Attaches; false when the sensor is already on the device. The light is marked pending in the
 * same statement (see detachSensor).
 */
export async function attachSensor(tx: ConfigTx, s: { deviceId: string; tdlId: string; profileId: number | null; label: string | null }): Promise<boolean> {
  const inserted = await tx.$executeRaw`
    WITH attached AS (
      INSERT INTO sensors (device_id, tdl_id, profile_id, label) VALUES (${s.deviceId}, ${s.tdlId}, ${s.profileId}, ${s.label})
      ON CONFLICT (device_id, tdl_id) DO NOTHING
      RETURNING device_id, created_at)
    INSERT INTO pending_lights (device_id, changed_at) SELECT device_id, created_at FROM attached
    ON CONFLICT (device_id) DO UPDATE SET changed_at = excluded.changed_at`;
  return inserted === 1;
}

/** Whether the sensor is attached to the device. */
export async function isAttached(tx: ConfigTx, deviceId: string, tdlId: string): Promise<boolean> {
  return (await tx.sensor.count({ where: { deviceId, tdlId } })) > 0;
}

/** Sets the profile (and label when given); false when the sensor is not attached. */
export async function updateSensor(tx: ConfigTx, deviceId: string, tdlId: string, change: { profileId: number | null; label?: string | null }): Promise<boolean> {
  const { count } = await tx.sensor.updateMany({ where: { deviceId, tdlId }, data: { profileId: change.profileId, ...(change.label !== undefined ? { label: change.label } : {}) } });
  return count === 1;
}

/**
 * Detaches; false when the sensor is not attached. The light is marked pending in the same
 * statement: the evaluation cycle lists the lights with a sensor and those with an alert state
 * (store/evaluation.ts, devicesOfShard), so a light whose only sensor goes before any cycle has
 * evaluated it would have neither and never be evaluated again; a pending light is evaluated by
 * the next cycle (NO_SENSORS, as a light that lost its sensors after evaluation), which keeps its
 * alert state from then on and clears the mark. Attaching marks the light too, so a light that
 * ever had a sensor is evaluated whichever way the sensor row goes.
 */
export async function detachSensor(tx: ConfigTx, deviceId: string, tdlId: string): Promise<boolean> {
  const detached = await tx.$executeRaw`
    WITH detached AS (DELETE FROM sensors WHERE device_id = ${deviceId} AND tdl_id = ${tdlId} RETURNING device_id)
    INSERT INTO pending_lights (device_id, changed_at) SELECT device_id, now() FROM detached
    ON CONFLICT (device_id) DO UPDATE SET changed_at = excluded.changed_at`;
  return detached === 1;
}

/** The light's chosen signal id, or null for the default. */
export async function chosenSignal(db: ConfigTx, deviceId: string): Promise<number | null> {
  return (await db.deviceSignal.findUnique({ where: { deviceId } }))?.signalId ?? null;
}

/** Sets the light's signal (null: the default). */
export async function chooseSignal(tx: ConfigTx, deviceId: string, signalId: number | null): Promise<void> {
  if (signalId === null) await tx.deviceSignal.deleteMany({ where: { deviceId } });
  else await tx.deviceSignal.upsert({ where: { deviceId }, create: { deviceId, signalId }, update: { signalId } });
}

/**
 * Light1 must be rewritten at the next cycle (its signal changed). The request is counted, so a
 * cycle whose write was chosen before it (with the signal as it was) does not clear it when it
 * records that write (store/evaluation.ts, recordWrites).
 */
export async function markForWrite(tx: ConfigTx, deviceIds: string[]): Promise<void> {
  if (deviceIds.length > 0) await tx.alertState.updateMany({ where: { deviceId: { in: deviceIds } }, data: { writeNeeded: true, writeRequests: { increment: 1 } } });
}

export async function alertLevelOf(db: ConfigTx, deviceId: string): Promise<string | null> {
  return (await db.alertState.findUnique({ where: { deviceId }, select: { level: true } }))?.level ?? null;
}

/** Everything config-alerting keeps about a removed device, as of the removal (readings received later stay). */
export async function forgetDevice(tx: ConfigTx, deviceId: string, removedAt: Date): Promise<void> {
  await tx.sensor.deleteMany({ where: { deviceId, createdAt: { lte: removedAt } } });
  await tx.deviceSignal.deleteMany({ where: { deviceId } });
  await tx.alertState.deleteMany({ where: { deviceId } });
  await tx.pendingLight.deleteMany({ where: { deviceId, changedAt: { lte: removedAt } } });
  await tx.reading.deleteMany({ where: { deviceId, receivedAt: { lte: removedAt } } });
}
