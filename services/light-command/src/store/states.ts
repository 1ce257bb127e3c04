import { Prisma } from '../generated/prisma/client';
import type { LightDb } from './prisma';

export interface StateReport {
  deviceId: string;
  channel: string;
  payload: string;
  updatedAt: Date;
}

/**
 * Stores reports as the last state per device channel, in one transaction. A report older than
 * the stored one (a redelivery, or messages out of order) never replaces it.
 */
export async function storeStates(db: LightDb, reports: StateReport[]): Promise<void> {
  const latest = new Map<string, StateReport>();
  for (const r of reports) {
    const key = `${r.deviceId}/${r.channel}`;
    const held = latest.get(key);
    if (!held || held.updatedAt.getTime() <= r.updatedAt.getTime()) latest.set(key, r);
  }
  if (latest.size === 0) return;
  const rows = [...latest.values()].map((r) => Prisma.sql`(${r.deviceId}, ${r.channel}, ${r.payload}, ${r.updatedAt})`);
  await db.$executeRaw`
    INSERT INTO light_states (device_id, channel, payload, updated_at)
    VALUES ${Prisma.join(rows)}
    ON CONFLICT (device_id, channel) DO UPDATE SET payload = EXCLUDED.payload, updated_at = EXCLUDED.updated_at
    WHERE light_states.updated_at <= EXCLUDED.updated_at`;
}

export async function statesOf(db: LightDb, deviceId: string): Promise<StateReport[]> {
  const rows = await db.lightState.findMany({ where: { deviceId }, orderBy: { channel: 'asc' } });
  return rows.map((r) => ({ deviceId: r.deviceId, channel: r.channel, payload: r.payload, updatedAt: r.updatedAt }));
}

/** Forgets the channel states of a removed device: all, or those reported up to the removal. */
export async function forgetDevice(db: LightDb, deviceId: string, reportedUpTo?: Date): Promise<number> {
  return (await db.lightState.deleteMany({ where: { deviceId, ...(reportedUpTo ? { updatedAt: { lte: reportedUpTo } } : {}) } })).count;
}
