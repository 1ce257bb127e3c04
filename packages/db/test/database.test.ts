import { Client } from 'pg';
import { createPrismaClient, databaseNameOf, databaseUrlFor, dropDatabase, ensureDatabase } from '@fleet/db';
import { PrismaPg } from '@prisma/adapter-pg';
import { BASE_URL, uniqueDatabaseUrl } from './support';

async function databaseExists(name: string): Promise<boolean> {
  const client = new Client({ connectionString: databaseUrlFor(BASE_URL, 'postgres') });
  await client.connect();
  try {
    return (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1;
  } finally {
    await client.end();
  }
}

describe('databaseUrlFor', () => {
  it('keeps server, credentials and parameters and swaps the database', () => {
    expect(databaseUrlFor('postgresql://u:p%40ss@db.example:6543/one?sslmode=require', 'two')).toBe(
      'postgresql://u:p%40ss@db.example:6543/two?sslmode=require',
    );
    expect(databaseUrlFor('postgres://postgres@127.0.0.1:5432', 'fleet')).toBe('postgres://postgres@127.0.0.1:5432/fleet');
  });

  it('encodes unusual names and round-trips them', () => {
    const url = databaseUrlFor('postgresql://postgres@127.0.0.1:5432/test', 'we ird/"name"');
    expect(databaseNameOf(url)).toBe('we ird/"name"');
  });

  it('rejects URLs that are not PostgreSQL or name no database', () => {
    expect(() => databaseUrlFor('mysql://x@y/z', 'a')).toThrow(/protocol/);
    expect(() => databaseNameOf('postgresql://postgres@127.0.0.1:5432')).toThrow(/does not name a database/);
  });
});

describe('ensureDatabase / dropDatabase', () => {
  const created: string[] = [];
  afterAll(async () => {
    for (const url of created) await dropDatabase(url);
  });

  it('creates the database once and reports false afterwards', async () => {
    const url = uniqueDatabaseUrl();
    created.push(url);
    expect(await ensureDatabase(url)).toBe(true);
    expect(await databaseExists(databaseNameOf(url))).toBe(true);
    expect(await ensureDatabase(url)).toBe(false);
  });

  it('lets exactly one of several concurrent callers create it', async () => {
    const url = uniqueDatabaseUrl();
    created.push(url);
    const results = await Promise.all([ensureDatabase(url), ensureDatabase(url), ensureDatabase(url)]);
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await databaseExists(databaseNameOf(url))).toBe(true);
  });

  it('quotes the identifier: names with quotes, spaces and capitals work and inject nothing', async () => {
    const name = `Fleet_dbtest "q"; SELECT 1 -- ${Date.now()}`;
    const url = databaseUrlFor(BASE_URL, name);
    created.push(url);
    expect(await ensureDatabase(url)).toBe(true);
    expect(await databaseExists(name)).toBe(true);
    await dropDatabase(url);
    expect(await databaseExists(name)).toBe(false);
  });

  it('drops a database that still has connections, and tolerates one that does not exist', async () => {
    const url = uniqueDatabaseUrl();
    created.push(url);
    await ensureDatabase(url);
    const holder = new Client({ connectionString: url });
    holder.on('error', () => undefined); // the forced drop terminates this session
    await holder.connect();
    await dropDatabase(url);
    expect(await databaseExists(databaseNameOf(url))).toBe(false);
    await holder.end().catch(() => undefined);
    await expect(dropDatabase(url)).resolves.toBeUndefined();
  });
});

describe('createPrismaClient', () => {
  class FakeClient {
    constructor(readonly opts: { adapter: unknown }) {}
  }

  it('passes a PrismaPg adapter with the pool size and schema', async () => {
    const client = createPrismaClient(FakeClient, `${BASE_URL}?schema=ignored`, { schema: 'tenant_a', max: 3 });
    const factory = client.opts.adapter;
    expect(factory).toBeInstanceOf(PrismaPg);
    const adapter = await (factory as PrismaPg).connect();
    try {
      expect(adapter.getConnectionInfo().schemaName).toBe('tenant_a');
      expect(adapter.underlyingDriver().options.max).toBe(3);
      const result = await adapter.queryRaw({ sql: 'SELECT 1 AS one', args: [], argTypes: [] });
      expect(result.rows).toEqual([[1]]);
    } finally {
      await adapter.dispose();
    }
  });

  it('takes the schema from the URL when no option is given', async () => {
    const client = createPrismaClient(FakeClient, `${BASE_URL}?schema=from_url`);
    const adapter = await (client.opts.adapter as PrismaPg).connect();
    try {
      expect(adapter.getConnectionInfo().schemaName).toBe('from_url');
      expect(adapter.underlyingDriver().options.connectionString).not.toContain('schema=');
    } finally {
      await adapter.dispose();
    }
  });
});
