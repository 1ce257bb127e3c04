import type { Bounds } from '../domain/catalog';
import type { LightDb } from './prisma';

export interface Grant {
  command: string;
  bounds: Bounds;
  grantedAt: Date;
}

const toGrant = (row: { command: string; bounds: unknown; grantedAt: Date }): Grant => ({
  command: row.command,
  bounds: (row.bounds ?? {}) as Bounds,
  grantedAt: row.grantedAt,
});

/** The commands granted to a partner, by name. */
export async function grantsOf(db: LightDb, partnerId: string): Promise<Map<string, Grant>> {
  const rows = await db.commandGrant.findMany({ where: { partnerId }, orderBy: { command: 'asc' } });
  return new Map(rows.map((r) => [r.command, toGrant(r)]));
}

export async function grantOf(db: LightDb, partnerId: string, command: string): Promise<Grant | null> {
  const row = await db.commandGrant.findUnique({ where: { partnerId_command: { partnerId, command } } });
  return row ? toGrant(row) : null;
}

/** Grants (or re-grants, replacing the bounds of) commands. */
export async function grantCommands(db: LightDb, partnerId: string, commands: string[], bounds: Bounds): Promise<void> {
  await db.$transaction(
    commands.map((command) =>
      db.commandGrant.upsert({
        where: { partnerId_command: { partnerId, command } },
        create: { partnerId, command, bounds: bounds as object },
        update: { bounds: bounds as object },
      }),
    ),
  );
}

/** Revokes commands; returns how many grants existed. */
export async function revokeCommands(db: LightDb, partnerId: string, commands: string[] | 'all'): Promise<number> {
  const where = commands === 'all' ? { partnerId } : { partnerId, command: { in: commands } };
  return (await db.commandGrant.deleteMany({ where })).count;
}
