/**
 * Profiles (with revisions) and signals: global rows (owner null) and partners' own. Edits and
 * deletes only ever touch the caller's own rows; the cap and the name check run under a
 * per-owner lock so concurrent creates cannot pass them together.
 */
import type { Prisma } from '../generated/prisma/client';
import type { Level } from '../domain/levels';
import type { Rule } from '../domain/metrics';
import type { ConfigDb, ConfigTx } from './prisma';

export type DocumentKind = 'profile' | 'signal';

export interface ProfileRow {
  id: number;
  ownerId: string | null;
  name: string;
  description: string | null;
  version: number;
  rules: Rule[];
  defaultLevel: Level;
  isDefault: boolean;
}

export interface SignalRow {
  id: number;
  ownerId: string | null;
  name: string;
  description: string | null;
  version: number;
  entries: Record<string, unknown>;
  isDefault: boolean;
}

const visibleTo = (ownerId: string) => ({ OR: [{ ownerId: null }, { ownerId }] });

/** Serializes an owner's creates and renames of one kind (cap and unique name) until the transaction ends. */
export async function lockOwner(tx: ConfigTx, kind: DocumentKind, ownerId: string): Promise<void> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext(${`${kind}:${ownerId}`}))`;
}

export async function countOwn(tx: ConfigTx, kind: DocumentKind, ownerId: string): Promise<number> {
  return kind === 'profile' ? tx.profile.count({ where: { ownerId } }) : tx.signal.count({ where: { ownerId } });
}

/** Whether a row the owner can see (global or own), other than `exceptId`, has this name. */
export async function nameTaken(tx: ConfigTx, kind: DocumentKind, ownerId: string, name: string, exceptId?: number): Promise<boolean> {
  const where = { ...visibleTo(ownerId), name, ...(exceptId !== undefined ? { NOT: { id: exceptId } } : {}) };
  const found = kind === 'profile' ? await tx.profile.findFirst({ where, select: { id: true } }) : await tx.signal.findFirst({ where, select: { id: true } });
  return found !== null;
}

const asProfile = (p: { id: number; ownerId: string | null; name: string; description: string | null; version: number; rules: Prisma.JsonValue; defaultLevel: string; isDefault: boolean }): ProfileRow => ({
  ...p,
  rules: p.rules as unknown as Rule[],
  defaultLevel: p.defaultLevel as Level,
});

const asSignal = (s: { id: number; ownerId: string | null; name: string; description: string | null; version: number; entries: Prisma.JsonValue; isDefault: boolean }): SignalRow => ({
  ...s,
  entries: s.entries as Record<string, unknown>,
});

/** Ids are positive int4 values: any other integer names no row (a larger one would be an overflow error in Postgres, not a miss). */
const ROW_ID_MAX = 2147483647;
const namesNoRow = (id: number): boolean => id < 1 || id > ROW_ID_MAX;

export async function visibleProfiles(db: ConfigTx, ownerId: string): Promise<ProfileRow[]> {
  return (await db.profile.findMany({ where: visibleTo(ownerId), orderBy: { id: 'asc' } })).map(asProfile);
}

export async function defaultProfile(db: ConfigTx): Promise<ProfileRow> {
  return asProfile(await db.profile.findFirstOrThrow({ where: { isDefault: true } }));
}

export async function profilesById(db: ConfigTx, ids: number[]): Promise<Map<number, ProfileRow>> {
  const rows = await db.profile.findMany({ where: { id: { in: ids } } });
  return new Map(rows.map((p) => [p.id, asProfile(p)]));
}

export interface ProfileFields {
  name: string;
  description: string | null;
  rules: Rule[];
  defaultLevel: Level;
}

export async function insertProfile(tx: ConfigTx, ownerId: string, f: ProfileFields): Promise<number> {
  const p = await tx.profile.create({ data: { ownerId, name: f.name, description: f.description, rules: f.rules as unknown as Prisma.InputJsonValue, defaultLevel: f.defaultLevel } });
  await tx.profileRevision.create({ data: { profileId: p.id, version: 1, name: f.name, description: f.description, rules: p.rules as Prisma.InputJsonValue, defaultLevel: f.defaultLevel } });
  return p.id;
}

/** Replaces the fields, bumps the version and keeps the new version as a revision. */
export async function updateProfile(tx: ConfigTx, current: ProfileRow, f: ProfileFields): Promise<number> {
  const version = current.version + 1;
  const rules = f.rules as unknown as Prisma.InputJsonValue;
  await tx.profile.update({ where: { id: current.id }, data: { name: f.name, description: f.description, rules, defaultLevel: f.defaultLevel, version, updatedAt: new Date() } });
  await tx.profileRevision.create({ data: { profileId: current.id, version, name: f.name, description: f.description, rules, defaultLevel: f.defaultLevel } });
  return version;
}

/**
 * The partner's own profile, locked (FOR UPDATE) for its change or deletion until the transaction
 * ends: a sensor being given it meanwhile (holdUsableProfile) is either committed first, and
 * counted by a deletion (409 in_use), or waits and finds it gone (404), never a 500 from the
 * foreign key.
 */
export async function ownProfile(tx: ConfigTx, ownerId: string, id: number): Promise<ProfileRow | null> {
  if (namesNoRow(id)) return null;
  const locked = await tx.$queryRaw<Array<{ id: number }>>`SELECT id FROM profiles WHERE id = ${id} AND owner_id = ${ownerId} FOR UPDATE`;
  if (locked.length === 0) return null;
  const p = await tx.profile.findFirst({ where: { id, ownerId } });
  return p ? asProfile(p) : null;
}

/**
 * Whether the partner may give a sensor this profile (global or own), holding it (FOR KEY
 * SHARE) until the transaction ends, so a deletion waits for the sensor (see ownProfile).
 */
export async function holdUsableProfile(tx: ConfigTx, ownerId: string, id: number): Promise<boolean> {
  if (namesNoRow(id)) return false;
  const held = await tx.$queryRaw<Array<{ id: number }>>`
    SELECT id FROM profiles WHERE id = ${id} AND (owner_id IS NULL OR owner_id = ${ownerId}) FOR KEY SHARE`;
  return held.length > 0;
}

export async function sensorsUsingProfile(tx: ConfigTx, id: number): Promise<number> {
  return tx.sensor.count({ where: { profileId: id } });
}

export async function deleteProfile(tx: ConfigTx, id: number): Promise<void> {
  await tx.profile.delete({ where: { id } });
}

export async function revisionsOf(db: ConfigDb, id: number): Promise<Array<{ version: number; rules: unknown }>> {
  return db.profileRevision.findMany({ where: { profileId: id }, orderBy: { version: 'asc' }, select: { version: true, rules: true } });
}

export async function visibleSignals(db: ConfigTx, ownerId: string): Promise<SignalRow[]> {
  return (await db.signal.findMany({ where: visibleTo(ownerId), orderBy: { id: 'asc' } })).map(asSignal);
}

/**
 * A signal the partner may choose for a light (global or own), held (FOR KEY SHARE) until the
 * transaction ends, as holdUsableProfile holds a profile: a deletion meanwhile either commits
 * first (the signal is then not found, 404) or waits and finds the light's choice to undo,
 * never a 500 from the foreign key.
 */
export async function holdVisibleSignal(tx: ConfigTx, ownerId: string, id: number): Promise<SignalRow | null> {
  if (namesNoRow(id)) return null;
  const held = await tx.$queryRaw<Array<{ id: number }>>`
    SELECT id FROM signals WHERE id = ${id} AND (owner_id IS NULL OR owner_id = ${ownerId}) FOR KEY SHARE`;
  if (held.length === 0) return null;
  const s = await tx.signal.findFirst({ where: { id, ...visibleTo(ownerId) } });
  return s ? asSignal(s) : null;
}

/**
 * The partner's own signal, locked (FOR UPDATE) for its change or deletion until the transaction
 * ends, as ownProfile locks a profile: two changes of one signal follow each other (each reads
 * what the other wrote, each its own version), and a change or deletion that finds the signal
 * deleted meanwhile is 404, never a 500.
 */
export async function ownSignal(tx: ConfigTx, ownerId: string, id: number): Promise<SignalRow | null> {
  if (namesNoRow(id)) return null;
  const locked = await tx.$queryRaw<Array<{ id: number }>>`SELECT id FROM signals WHERE id = ${id} AND owner_id = ${ownerId} FOR UPDATE`;
  if (locked.length === 0) return null;
  const s = await tx.signal.findFirst({ where: { id, ownerId } });
  return s ? asSignal(s) : null;
}

export async function defaultSignal(db: ConfigTx): Promise<SignalRow> {
  return asSignal(await db.signal.findFirstOrThrow({ where: { isDefault: true } }));
}

export async function signalsById(db: ConfigTx, ids: number[]): Promise<Map<number, SignalRow>> {
  const rows = await db.signal.findMany({ where: { id: { in: ids } } });
  return new Map(rows.map((s) => [s.id, asSignal(s)]));
}

export interface SignalFields {
  name: string;
  description: string | null;
  entries: Record<string, unknown>;
}

export async function insertSignal(tx: ConfigTx, ownerId: string, f: SignalFields): Promise<number> {
  return (await tx.signal.create({ data: { ownerId, name: f.name, description: f.description, entries: f.entries as Prisma.InputJsonValue }, select: { id: true } })).id;
}

export async function updateSignal(tx: ConfigTx, current: SignalRow, f: SignalFields): Promise<number> {
  const version = current.version + 1;
  await tx.signal.update({ where: { id: current.id }, data: { name: f.name, description: f.description, entries: f.entries as Prisma.InputJsonValue, version, updatedAt: new Date() } });
  return version;
}

/** Deletes the signal; the lights that showed it go back to the default signal (their rows cascade). Returns those lights. */
export async function deleteSignal(tx: ConfigTx, id: number): Promise<string[]> {
  const lights = (await tx.deviceSignal.findMany({ where: { signalId: id }, select: { deviceId: true } })).map((d) => d.deviceId);
  await tx.signal.delete({ where: { id } });
  return lights;
}

/** The lights showing a signal. */
export async function lightsShowing(tx: ConfigTx, signalId: number): Promise<string[]> {
  return (await tx.deviceSignal.findMany({ where: { signalId }, select: { deviceId: true } })).map((d) => d.deviceId);
}
