import type { Channel, Permission } from '@fleet/contracts';
import type { GatewayDb } from './prisma';

/** Channel the gateway's caches listen on: any change to a partner or key is announced here. */
export const AUTH_CHANGES_CHANNEL = 'gateway_auth_changed';

export interface PartnerRecord {
  id: string;
  name: string;
  permissions: Permission[];
  orgGrants: number[];
  allowedChannels: Channel[];
  requestsPerMin: number;
  deviceCommandsPerMin: number;
  disabledAt: Date | null;
}

export interface KeyWithPartner {
  keyPrefix: string;
  secretHash: string;
  revokedAt: Date | null;
  partner: PartnerRecord;
}

export type PartnerInput = Omit<PartnerRecord, 'id' | 'disabledAt'>;

const asPartner = (row: {
  id: string; name: string; permissions: string[]; orgGrants: number[]; allowedChannels: string[];
  requestsPerMin: number; deviceCommandsPerMin: number; disabledAt: Date | null;
}): PartnerRecord => ({
  id: row.id,
  name: row.name,
  permissions: row.permissions as Permission[],
  orgGrants: row.orgGrants,
  allowedChannels: row.allowedChannels as Channel[],
  requestsPerMin: row.requestsPerMin,
  deviceCommandsPerMin: row.deviceCommandsPerMin,
  disabledAt: row.disabledAt,
});

export async function findKey(db: GatewayDb, keyPrefix: string): Promise<KeyWithPartner | null> {
  const row = await db.apiKey.findUnique({ where: { keyPrefix }, include: { partner: true } });
  if (!row) return null;
  return { keyPrefix: row.keyPrefix, secretHash: row.secretHash, revokedAt: row.revokedAt, partner: asPartner(row.partner) };
}

export async function findPartner(db: GatewayDb, id: string): Promise<PartnerRecord | null> {
  const row = await db.partner.findUnique({ where: { id } });
  return row ? asPartner(row) : null;
}

/** What a partner may see now, as the principal of its requests carries it. */
export interface PartnerAccess {
  partnerId: string;
  permissions: Permission[];
  orgGrants: number[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The permissions and organization grants of the enabled partners among `ids`, in the order
 * asked; disabled and unknown ones (an id that is no partner id at all among them) are left out.
 */
export async function partnerAccess(db: GatewayDb, ids: readonly string[]): Promise<PartnerAccess[]> {
  const wanted = [...new Set(ids.filter((id) => UUID.test(id)).map((id) => id.toLowerCase()))];
  if (wanted.length === 0) return [];
  const rows = await db.partner.findMany({
    where: { id: { in: wanted }, disabledAt: null },
    select: { id: true, permissions: true, orgGrants: true },
  });
  const byId = new Map(rows.map((row) => [row.id, row]));
  return ids.flatMap((id) => {
    const row = UUID.test(id) ? byId.get(id.toLowerCase()) : undefined;
    if (!row) return [];
    byId.delete(row.id);
    return [{ partnerId: id, permissions: row.permissions as Permission[], orgGrants: row.orgGrants }];
  });
}

/** Every write announces itself in the same transaction, so caches drop stale entries on commit. */
async function announce(tx: Pick<GatewayDb, '$executeRaw'>, what: string): Promise<void> {
  await tx.$executeRaw`SELECT pg_notify(${AUTH_CHANGES_CHANNEL}, ${what})`;
}

export async function createPartner(db: GatewayDb, input: PartnerInput): Promise<PartnerRecord> {
  return db.$transaction(async (tx) => {
    const row = await tx.partner.create({ data: input });
    await announce(tx, `partner:${row.id}`);
    return asPartner(row);
  });
}

export async function updatePartner(db: GatewayDb, id: string, patch: Partial<PartnerInput>): Promise<PartnerRecord | null> {
  return db.$transaction(async (tx) => {
    const found = await tx.partner.findUnique({ where: { id } });
    if (!found) return null;
    const row = await tx.partner.update({ where: { id }, data: patch });
    await announce(tx, `partner:${id}`);
    return asPartner(row);
  });
}

export async function disablePartner(db: GatewayDb, id: string): Promise<PartnerRecord | null> {
  return db.$transaction(async (tx) => {
    const found = await tx.partner.findUnique({ where: { id } });
    if (!found) return null;
    const row = await tx.partner.update({ where: { id }, data: { disabledAt: found.disabledAt ?? new Date() } });
    await announce(tx, `partner:${id}`);
    return asPartner(row);
  });
}

export async function storeKey(db: GatewayDb, partnerId: string, keyPrefix: string, secretHash: string): Promise<void> {
  await db.$transaction(async (tx) => {
    await tx.apiKey.create({ data: { partnerId, keyPrefix, secretHash } });
    await announce(tx, `key:${keyPrefix}`);
  });
}

/** Marks a key revoked; false when no such key exists. Revoking twice keeps the first time. */
export async function revokeKey(db: GatewayDb, keyPrefix: string): Promise<boolean> {
  return db.$transaction(async (tx) => {
    const found = await tx.apiKey.findUnique({ where: { keyPrefix } });
    if (!found) return false;
    if (!found.revokedAt) await tx.apiKey.update({ where: { keyPrefix }, data: { revokedAt: new Date() } });
    await announce(tx, `key:${keyPrefix}`);
    return true;
  });
}
