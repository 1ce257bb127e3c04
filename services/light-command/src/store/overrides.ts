import type { Bounds, CommandOverride } from '../domain/catalog';
import type { LightDb } from './prisma';

/** Staff's override of one command for one partner, as stored. */
export interface StoredOverride extends CommandOverride {
  command: string;
  setAt: Date;
}

const toOverride = (row: { command: string; withdrawn: boolean; bounds: unknown; setAt: Date }): StoredOverride => ({
  command: row.command,
  withdrawn: row.withdrawn,
  bounds: (row.bounds ?? {}) as Bounds,
  setAt: row.setAt,
});

/** A partner's overrides, by command name; commands without one have the catalog's bounds. */
export async function overridesOf(db: LightDb, partnerId: string): Promise<Map<string, StoredOverride>> {
  const rows = await db.commandOverride.findMany({ where: { partnerId } });
  return new Map(rows.map((r) => [r.command, toOverride(r)]));
}

export async function overrideOf(db: LightDb, partnerId: string, command: string): Promise<StoredOverride | null> {
  const row = await db.commandOverride.findUnique({ where: { partnerId_command: { partnerId, command } } });
  return row ? toOverride(row) : null;
}

/** Makes a command available with narrowed bounds, replacing any earlier narrowing or withdrawal. */
export async function narrowCommand(db: LightDb, partnerId: string, command: string, bounds: Bounds): Promise<void> {
  await db.commandOverride.upsert({
    where: { partnerId_command: { partnerId, command } },
    create: { partnerId, command, withdrawn: false, bounds: bounds as object },
    update: { withdrawn: false, bounds: bounds as object, setAt: new Date() },
  });
}

/** Withdraws commands; a narrowing they had is dropped with them. */
export async function withdrawCommands(db: LightDb, partnerId: string, commands: readonly string[]): Promise<void> {
  await db.$transaction(
    commands.map((command) =>
      db.commandOverride.upsert({
        where: { partnerId_command: { partnerId, command } },
        create: { partnerId, command, withdrawn: true, bounds: {} },
        update: { withdrawn: true, bounds: {}, setAt: new Date() },
      }),
    ),
  );
}

/** Removes overrides, so the commands are available with the catalog's bounds again; returns the commands that had one. */
export async function resetCommands(db: LightDb, partnerId: string, commands: readonly string[] | 'all'): Promise<string[]> {
  const where = commands === 'all' ? { partnerId } : { partnerId, command: { in: [...commands] } };
  return db.$transaction(async (tx) => {
    const names = (await tx.commandOverride.findMany({ where, select: { command: true } })).map((r) => r.command);
    await tx.commandOverride.deleteMany({ where: { partnerId, command: { in: names } } });
    return names.sort();
  });
}
