import type { EventsDb, EventsTx } from './prisma';

/**
 * Takes a lease for a new live stream unless the partner holds `max` live ones (counted under
 * a lock on the partner, so streams opened at once cannot pass the limit together). Leases that
 * ran out are dropped on the way. False when the partner is at its limit.
 */
export async function takeStreamLease(db: EventsDb, id: string, partnerId: string, max: number, ttlMs: number): Promise<boolean> {
  return db.$transaction(async (tx) => {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext(${`streams:${partnerId}`}))`;
    await tx.streamLease.deleteMany({ where: { partnerId, expiresAt: { lte: new Date() } } });
    if ((await tx.streamLease.count({ where: { partnerId } })) >= max) return false;
    await tx.streamLease.create({ data: { id, partnerId, expiresAt: new Date(Date.now() + ttlMs) } });
    return true;
  });
}

export async function renewStreamLeases(db: EventsTx, ids: string[], ttlMs: number): Promise<void> {
  if (ids.length > 0) await db.streamLease.updateMany({ where: { id: { in: ids } }, data: { expiresAt: new Date(Date.now() + ttlMs) } });
}

export async function dropStreamLease(db: EventsTx, id: string): Promise<void> {
  await db.streamLease.deleteMany({ where: { id } });
}
