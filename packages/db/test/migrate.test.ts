import { createHash, randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import { dropDatabase, ensureDatabase, migrate } from '@fleet/db';
import { makeMigrationsDir, uniqueDatabaseUrl, writeMigration } from './support';

const DB_URL = uniqueDatabaseUrl();
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
let client: Client;
const tempDirs: string[] = [];
let schemaCounter = 0;

/** Each scenario migrates its own schema of the file's database (`?schema=`, as with Prisma). */
function freshSchemaUrl(): { url: string; schema: string } {
  const schema = `s${++schemaCounter}_${randomUUID().slice(0, 8)}`;
  return { url: `${DB_URL}?schema=${schema}`, schema };
}

async function dir(migrations: Record<string, string>): Promise<string> {
  const d = await makeMigrationsDir(migrations);
  tempDirs.push(d);
  return d;
}

async function rows(schema: string) {
  const result = await client.query<{
    id: string;
    migration_name: string;
    checksum: string;
    finished_at: Date | null;
    rolled_back_at: Date | null;
    applied_steps_count: number;
    logs: string | null;
  }>(`SELECT * FROM "${schema}"._prisma_migrations ORDER BY migration_name, started_at`);
  return result.rows;
}

async function tableExists(schema: string, table: string): Promise<boolean> {
  const r = await client.query('SELECT to_regclass($1) AS oid', [`"${schema}"."${table}"`]);
  return r.rows[0].oid !== null;
}

const M1 = '-- CreateTable\nCREATE TABLE "Device" (\n    "id" TEXT NOT NULL,\n    CONSTRAINT "Device_pkey" PRIMARY KEY ("id")\n);\n';
const M2 = '-- AlterTable\nALTER TABLE "Device" ADD COLUMN "name" TEXT;\nCREATE INDEX "Device_name_idx" ON "Device"("name");\n';
const M3 = 'CREATE TABLE "Reading" ("id" BIGSERIAL PRIMARY KEY, "deviceId" TEXT NOT NULL REFERENCES "Device"("id"));\n';

beforeAll(async () => {
  await ensureDatabase(DB_URL);
  client = new Client({ connectionString: DB_URL });
  await client.connect();
});

afterAll(async () => {
  await client?.end();
  await dropDatabase(DB_URL);
  for (const d of tempDirs) await fs.rm(d, { recursive: true, force: true });
});

describe('migrate', () => {
  it('applies pending migrations in order, records them like Prisma, is a no-op when up to date, and picks up a new one', async () => {
    const migrationsDir = await dir({ '20250101000000_init': M1, '20250102000000_device_name': M2 });
    const logs: Array<{ obj: object; msg?: string }> = [];
    const logger = { info: (obj: object, msg?: string) => logs.push({ obj, msg }) };

    // No ?schema= parameter: like Prisma, the public schema.
    const first = await migrate(DB_URL, migrationsDir, { logger });
    expect(first.applied).toEqual(['20250101000000_init', '20250102000000_device_name']);
    expect(await tableExists('public', 'Device')).toBe(true);
    const recorded = await rows('public');
    expect(recorded.map((r) => r.migration_name)).toEqual(['20250101000000_init', '20250102000000_device_name']);
    expect(recorded.map((r) => r.checksum)).toEqual([sha256(M1), sha256(M2)]);
    for (const r of recorded) {
      expect(r.finished_at).toBeInstanceOf(Date);
      expect(r.rolled_back_at).toBeNull();
      expect(r.applied_steps_count).toBe(1);
      expect(r.id).toMatch(/^[0-9a-f-]{36}$/);
    }
    expect(logs.some((l) => JSON.stringify(l.obj).includes('20250102000000_device_name'))).toBe(true);

    const second = await migrate(DB_URL, migrationsDir, { logger });
    expect(second.applied).toEqual([]);
    expect(await rows('public')).toHaveLength(2);

    await writeMigration(migrationsDir, '20250103000000_readings', M3);
    const third = await migrate(DB_URL, migrationsDir);
    expect(third.applied).toEqual(['20250103000000_readings']);
    expect(await tableExists('public', 'Reading')).toBe(true);
    const after = await rows('public');
    expect(after).toHaveLength(3);
    expect(after[2]?.checksum).toBe(sha256(M3));
  });

  it('creates _prisma_migrations with exactly the columns Prisma uses', async () => {
    const cols = await client.query(
      `SELECT column_name, data_type, character_maximum_length AS len, is_nullable, column_default
         FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '_prisma_migrations'
        ORDER BY ordinal_position`,
    );
    expect(cols.rows).toEqual([
      { column_name: 'id', data_type: 'character varying', len: 36, is_nullable: 'NO', column_default: null },
      { column_name: 'checksum', data_type: 'character varying', len: 64, is_nullable: 'NO', column_default: null },
      { column_name: 'finished_at', data_type: 'timestamp with time zone', len: null, is_nullable: 'YES', column_default: null },
      { column_name: 'migration_name', data_type: 'character varying', len: 255, is_nullable: 'NO', column_default: null },
      { column_name: 'logs', data_type: 'text', len: null, is_nullable: 'YES', column_default: null },
      { column_name: 'rolled_back_at', data_type: 'timestamp with time zone', len: null, is_nullable: 'YES', column_default: null },
      { column_name: 'started_at', data_type: 'timestamp with time zone', len: null, is_nullable: 'NO', column_default: 'now()' },
      { column_name: 'applied_steps_count', data_type: 'integer', len: null, is_nullable: 'NO', column_default: '0' },
    ]);
    const pk = await client.query(
      `SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
        WHERE i.indrelid = 'public._prisma_migrations'::regclass AND i.indisprimary`,
    );
    expect(pk.rows).toEqual([{ attname: 'id' }]);
  });

  it('serializes concurrent runners: every migration is applied exactly once', async () => {
    const { url, schema } = freshSchemaUrl();
    const migrationsDir = await dir({
      '20250101000000_init': M1 + 'SELECT pg_sleep(0.3);\n',
      '20250102000000_device_name': M2,
      '20250103000000_readings': M3,
    });
    const results = await Promise.all([migrate(url, migrationsDir), migrate(url, migrationsDir), migrate(url, migrationsDir)]);
    const all = results.flatMap((r) => r.applied).sort();
    expect(all).toEqual(['20250101000000_init', '20250102000000_device_name', '20250103000000_readings']);
    // One runner did the work; the others found nothing pending once they got the lock.
    expect(results.filter((r) => r.applied.length > 0)).toHaveLength(1);
    const recorded = await rows(schema);
    expect(recorded).toHaveLength(3);
    expect(recorded.every((r) => r.finished_at !== null)).toBe(true);
    expect(await tableExists(schema, 'Reading')).toBe(true);
  });

  it('refuses to start when an applied migration was modified, but accepts a line-ending-only change', async () => {
    const { url, schema } = freshSchemaUrl();
    const migrationsDir = await dir({ '20250101000000_init': M1 });
    await migrate(url, migrationsDir);

    await writeMigration(migrationsDir, '20250101000000_init', M1.replace(/\n/g, '\r\n'));
    await expect(migrate(url, migrationsDir)).resolves.toEqual({ applied: [] });

    await writeMigration(migrationsDir, '20250101000000_init', M1 + 'ALTER TABLE "Device" ADD COLUMN "x" INT;\n');
    await writeMigration(migrationsDir, '20250102000000_device_name', M2);
    await expect(migrate(url, migrationsDir)).rejects.toThrow(/20250101000000_init was modified after it was applied/);
    // Nothing else ran.
    expect((await rows(schema)).map((r) => r.migration_name)).toEqual(['20250101000000_init']);
    const cols = await client.query(
      `SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'Device'`,
      [schema],
    );
    expect(cols.rows.map((r) => r.column_name)).toEqual(['id']);
  });

  it('rolls back a failing migration, names it and the Postgres error, and applies it once fixed', async () => {
    const { url, schema } = freshSchemaUrl();
    const broken = 'CREATE TABLE "Partial" ("id" INT);\nINSERT INTO "NoSuchTable" VALUES (1);\n';
    const migrationsDir = await dir({ '20250101000000_init': M1, '20250102000000_broken': broken, '20250103000000_later': M3 });

    const error: Error = await migrate(url, migrationsDir).then(
      () => new Error('expected a failure'),
      (e: Error) => e,
    );
    expect(error.message).toMatch(/Migration 20250102000000_broken failed/);
    expect(error.message).toMatch(/relation "NoSuchTable" does not exist/);

    expect(await tableExists(schema, 'Device')).toBe(true); // the earlier migration stays committed
    expect(await tableExists(schema, 'Partial')).toBe(false);
    expect(await tableExists(schema, 'Reading')).toBe(false);
    const recorded = await rows(schema);
    expect(recorded.map((r) => r.migration_name)).toEqual(['20250101000000_init']);

    await writeMigration(migrationsDir, '20250102000000_broken', 'CREATE TABLE "Partial" ("id" INT);\n');
    await expect(migrate(url, migrationsDir)).resolves.toEqual({ applied: ['20250102000000_broken', '20250103000000_later'] });
  });

  it('refuses to start while _prisma_migrations holds a failed migration, and re-applies one marked rolled back', async () => {
    const { url, schema } = freshSchemaUrl();
    const migrationsDir = await dir({ '20250101000000_init': M1, '20250102000000_device_name': M2 });
    await migrate(url, migrationsDir);
    // What `prisma migrate deploy` leaves behind when a migration fails half-way.
    await client.query(`DELETE FROM "${schema}"._prisma_migrations WHERE migration_name = '20250102000000_device_name'`);
    await client.query(`ALTER TABLE "${schema}"."Device" DROP COLUMN "name"`);
    await client.query(
      `INSERT INTO "${schema}"._prisma_migrations (id, checksum, migration_name, logs, applied_steps_count)
       VALUES ($1, $2, '20250102000000_device_name', 'boom', 0)`,
      [randomUUID(), sha256(M2)],
    );
    await expect(migrate(url, migrationsDir)).rejects.toThrow(/20250102000000_device_name failed/);

    // `prisma migrate resolve --rolled-back` sets rolled_back_at: the migration is pending again.
    await client.query(`UPDATE "${schema}"._prisma_migrations SET rolled_back_at = now() WHERE finished_at IS NULL`);
    await expect(migrate(url, migrationsDir)).resolves.toEqual({ applied: ['20250102000000_device_name'] });
    const recorded = await rows(schema);
    expect(recorded.filter((r) => r.migration_name === '20250102000000_device_name')).toHaveLength(2);
  });

  it('refuses to start when a finished migration has no folder', async () => {
    const { url, schema } = freshSchemaUrl();
    const migrationsDir = await dir({ '20250101000000_init': M1, '20250102000000_device_name': M2 });
    await migrate(url, migrationsDir);
    await fs.rm(path.join(migrationsDir, '20250102000000_device_name'), { recursive: true });
    await writeMigration(migrationsDir, '20250103000000_readings', M3);
    await expect(migrate(url, migrationsDir)).rejects.toThrow(/20250102000000_device_name is applied in the database but its folder is missing/);
    expect(await tableExists(schema, 'Reading')).toBe(false);
  });

  it('reports a folder without migration.sql and a missing migrations directory', async () => {
    const { url } = freshSchemaUrl();
    const migrationsDir = await dir({});
    await fs.mkdir(path.join(migrationsDir, '20250101000000_empty'));
    await expect(migrate(url, migrationsDir)).rejects.toThrow(/20250101000000_empty has no migration.sql/);
    await expect(migrate(url, path.join(migrationsDir, 'nope'))).rejects.toThrow(/Cannot read migrations directory/);
  });
});
