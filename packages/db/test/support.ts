import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { databaseUrlFor } from '@fleet/db';

/** The local server (trust auth); CI or a developer may point elsewhere. */
export const BASE_URL = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';

export function uniqueDatabaseUrl(prefix = 'fleet_dbtest'): string {
  return databaseUrlFor(BASE_URL, `${prefix}_${randomBytes(6).toString('hex')}`);
}

/** A temp migrations folder in Prisma's layout. */
export async function makeMigrationsDir(migrations: Record<string, string>): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'fleet-db-migrations-'));
  await fs.writeFile(path.join(dir, 'migration_lock.toml'), 'provider = "postgresql"\n');
  for (const [name, sql] of Object.entries(migrations)) await writeMigration(dir, name, sql);
  return dir;
}

export async function writeMigration(dir: string, name: string, sql: string): Promise<void> {
  await fs.mkdir(path.join(dir, name), { recursive: true });
  await fs.writeFile(path.join(dir, name, 'migration.sql'), sql);
}
