/**
 * The migration from grants (a partner had only the commands staff granted) to overrides (a
 * partner has the whole catalog unless staff withdraw or narrow): a database holding grants is
 * migrated, and every partner keeps what it could use, while a partner without grants gains
 * the catalog.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { dropDatabase, ensureDatabase, migrate, readMigrations } from '@fleet/db';
import { databaseUrl, uniqueId } from '@fleet/test-kit';
import { availableCommands, CATALOG } from '../src/domain/catalog';
import { MIGRATIONS_DIR } from '../src/migrations';
import { overridesOf } from '../src/store/overrides';
import { openLightDb, type LightDb } from '../src/store/prisma';

const url = databaseUrl(uniqueId('light_command_migration_test_'));
let before: string;
let db: LightDb | undefined;

beforeAll(async () => {
  // Only the migrations written before overrides existed.
  const migrations = await readMigrations(MIGRATIONS_DIR);
  const index = migrations.findIndex((m) => m.name.endsWith('_command_overrides'));
  expect(index).toBeGreaterThan(0);
  before = await fs.mkdtemp(path.join(os.tmpdir(), 'light-command-migrations-'));
  for (const m of migrations.slice(0, index)) {
    await fs.mkdir(path.join(before, m.name));
    await fs.writeFile(path.join(before, m.name, 'migration.sql'), m.script);
  }
  await ensureDatabase(url);
  await migrate(url, before);
});

afterAll(async () => {
  await db?.$disconnect();
  await dropDatabase(url);
  await fs.rm(before, { recursive: true, force: true });
});

test('grants become overrides: granted commands keep their bounds, the others are withdrawn; partners without grants have everything', async () => {
  const some = crypto.randomUUID();
  const all = crypto.randomUUID();
  const none = crypto.randomUUID();
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const grant = (partner: string, command: string, bounds: object = {}) =>
      client.query('INSERT INTO command_grants (partner_id, command, bounds) VALUES ($1, $2, $3)', [partner, command, JSON.stringify(bounds)]);
    await grant(some, 'pulse', { period_s: { min: 0.5, max: 2 } });
    await grant(some, 'off');
    for (const c of CATALOG) await grant(all, c.name);
  } finally {
    await client.end();
  }

  await migrate(url, MIGRATIONS_DIR);
  db = openLightDb(url, 2);

  const names = async (partner: string) => availableCommands(await overridesOf(db as LightDb, partner)).map((c) => c.def.name);
  expect(await names(some)).toEqual(['off', 'pulse']);
  expect((await overridesOf(db, some)).get('pulse')).toMatchObject({ withdrawn: false, bounds: { period_s: { min: 0.5, max: 2 } } });
  expect(await names(all)).toEqual(CATALOG.map((c) => c.name));
  expect(await names(none)).toEqual(CATALOG.map((c) => c.name));
  // A grant that narrowed nothing is no override any more.
  expect([...(await overridesOf(db, all)).keys()]).toEqual([]);
  expect((await overridesOf(db, some)).has('off')).toBe(false);
});
