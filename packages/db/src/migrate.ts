/**
 * Applies SQL migrations kept in Prisma's layout (`<dir>/<timestamp>_<name>/migration.sql`) and
 * records them in `_prisma_migrations` exactly as `prisma migrate deploy` does, so either tool
 * can take over from the other.
 */
import { createHash, randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Client, DatabaseError } from 'pg';
import { installCommitGuard } from './commit-guard';
import { pgConnectionString, schemaOf } from './url';

export interface MigrateLogger {
  info(obj: object, msg?: string): void;
}

export interface MigrateOptions {
  logger?: MigrateLogger;
}

export interface MigrateResult {
  /** Names of the migrations this call applied, in order. */
  applied: string[];
}

interface MigrationFile {
  name: string;
  script: string;
  checksum: string;
}

interface MigrationRow {
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
}

/** The advisory lock key `prisma migrate` takes on PostgreSQL. */
export const PRISMA_MIGRATE_LOCK_KEY = 72707369;

/** The bookkeeping table, created with Prisma's exact definition. */
const createMigrationsTable = (table: string) => `CREATE TABLE IF NOT EXISTS ${table} (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Like Prisma, accept a checksum computed with either line ending convention. */
function scriptMatchesChecksum(script: string, checksum: string): boolean {
  if (sha256Hex(script) === checksum) return true;
  const lf = script.replace(/\r\n/g, '\n');
  return sha256Hex(lf) === checksum || sha256Hex(lf.replace(/\n/g, '\r\n')) === checksum;
}

/** The migrations found in `migrationsDir`, sorted by name. Plain files (migration_lock.toml) are ignored. */
export async function readMigrations(migrationsDir: string): Promise<MigrationFile[]> {
  let entries;
  try {
    entries = await fs.readdir(migrationsDir, { withFileTypes: true });
  } catch (err) {
    throw new Error(`Cannot read migrations directory ${migrationsDir}: ${(err as Error).message}`);
  }
  const names = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const migrations: MigrationFile[] = [];
  for (const name of names) {
    const file = path.join(migrationsDir, name, 'migration.sql');
    let script: string;
    try {
      script = await fs.readFile(file, 'utf8');
    } catch {
      throw new Error(`Migration ${name} has no migration.sql (${file})`);
    }
    migrations.push({ name, script, checksum: sha256Hex(script) });
  }
  return migrations;
}

/** Checks the recorded history against the folder and returns the migrations still to apply. */
function pendingMigrations(files: MigrationFile[], rows: MigrationRow[]): MigrationFile[] {
  const failed = rows.filter((r) => r.finished_at === null && r.rolled_back_at === null);
  if (failed.length > 0) {
    const names = failed.map((r) => r.migration_name).join(', ');
    throw new Error(
      `Refusing to migrate: migration(s) ${names} failed or are still running (a row in _prisma_migrations has ` +
        'neither finished_at nor rolled_back_at). Fix the database by hand, then mark the row rolled back ' +
        '(`prisma migrate resolve --rolled-back <name>`) or applied.',
    );
  }
  const byName = new Map(files.map((f) => [f.name, f]));
  const applied = new Set<string>();
  for (const row of rows) {
    if (row.finished_at === null) continue; // rolled back: it counts as not applied
    const file = byName.get(row.migration_name);
    if (!file) {
      throw new Error(
        `Refusing to migrate: migration ${row.migration_name} is applied in the database but its folder is ` +
          'missing from the migrations directory.',
      );
    }
    if (!scriptMatchesChecksum(file.script, row.checksum)) {
      throw new Error(
        `Refusing to migrate: migration ${row.migration_name} was modified after it was applied ` +
          `(checksum in database ${row.checksum}, file ${file.checksum}).`,
      );
    }
    applied.add(row.migration_name);
  }
  return files.filter((f) => !applied.has(f.name));
}

/** Creates the schema if missing (checked first: CREATE SCHEMA needs a privilege `public` users may lack). */
async function ensureSchema(client: Client, schema: string): Promise<void> {
  const found = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
  if (found.rowCount === 0) await client.query(`CREATE SCHEMA IF NOT EXISTS ${client.escapeIdentifier(schema)}`);
}

async function applyOne(client: Client, table: string, schema: string, migration: MigrationFile): Promise<void> {
  // A previous script may have changed the session's search_path: start each one from the same place.
  await client.query(`SET search_path TO ${client.escapeIdentifier(schema)}`);
  await client.query('BEGIN');
  try {
    const id = randomUUID();
    await client.query(
      `INSERT INTO ${table} (id, checksum, migration_name, started_at, applied_steps_count) ` +
        'VALUES ($1, $2, $3, now(), 0)',
      [id, migration.checksum, migration.name],
    );
    // No parameters: the simple query protocol runs a multi-statement script.
    await client.query(migration.script);
    await client.query(
      `UPDATE ${table} SET finished_at = clock_timestamp(), applied_steps_count = applied_steps_count + 1 WHERE id = $1`,
      [id],
    );
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    const detail = err instanceof DatabaseError ? `${err.message}${err.code ? ` (SQLSTATE ${err.code})` : ''}` : String(err);
    throw new Error(`Migration ${migration.name} failed and was rolled back: ${detail}`, { cause: err });
  }
}

/**
 * Applies the pending migrations of `migrationsDir` to the database, each in its own transaction
 * together with its `_prisma_migrations` row. Concurrent runners wait on Prisma's advisory lock.
 * The `?schema=` URL parameter selects the schema, as with Prisma (default `public`). Also
 * installs the commit guard (commit-guard.ts, schema `fleet_kit`) if it is missing, so every
 * service has it from its start.
 */
export async function migrate(databaseUrl: string, migrationsDir: string, opts: MigrateOptions = {}): Promise<MigrateResult> {
  const files = await readMigrations(migrationsDir);
  const schema = schemaOf(databaseUrl) ?? 'public';
  const client = new Client({ connectionString: pgConnectionString(databaseUrl) });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [PRISMA_MIGRATE_LOCK_KEY]);
    try {
      await ensureSchema(client, schema);
      const table = `${client.escapeIdentifier(schema)}."_prisma_migrations"`;
      await client.query(createMigrationsTable(table));
      const { rows } = await client.query<MigrationRow>(
        `SELECT migration_name, checksum, finished_at, rolled_back_at FROM ${table} ORDER BY started_at`,
      );
      const pending = pendingMigrations(files, rows);
      const applied: string[] = [];
      for (const migration of pending) {
        const started = Date.now();
        await applyOne(client, table, schema, migration);
        applied.push(migration.name);
        opts.logger?.info({ migration: migration.name, ms: Date.now() - started }, 'migration applied');
      }
      opts.logger?.info({ applied: applied.length, total: files.length, schema }, 'database migrations up to date');
      await installCommitGuard(client);
      return { applied };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [PRISMA_MIGRATE_LOCK_KEY]).catch(() => undefined);
    }
  } finally {
    await client.end();
  }
}
