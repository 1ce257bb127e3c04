import { Client } from 'pg';
import { createPreparedReader, dropDatabase, ensureDatabase } from '@fleet/db';
import { uniqueDatabaseUrl } from './support';

const url = uniqueDatabaseUrl('fleet_reader');

beforeAll(async () => {
  await ensureDatabase(url);
  const client = new Client({ connectionString: url });
  await client.connect();
  await client.query('CREATE SCHEMA other; CREATE TABLE public.t (n int); CREATE TABLE other.t (n int); INSERT INTO public.t VALUES (1), (2); INSERT INTO other.t VALUES (10)');
  await client.end();
});
afterAll(async () => {
  await dropDatabase(url);
});

describe('createPreparedReader', () => {
  it('reads with parameters through one named statement per query text, on every connection', async () => {
    const reader = createPreparedReader(url, { max: 2, startupOptions: '-c jit=off' });
    try {
      const reads = Array.from({ length: 12 }, (_, k) => reader.$queryRawUnsafe<Array<{ s: string }>>('SELECT sum(n + $1::int)::text AS s FROM t', k));
      expect((await Promise.all(reads)).map((rows) => rows[0]?.s)).toEqual(Array.from({ length: 12 }, (_, k) => String(3 + 2 * k)));
      const statements = await reader.$queryRawUnsafe<Array<{ name: string; jit: string }>>(
        "SELECT name, current_setting('jit') AS jit FROM pg_prepared_statements WHERE statement LIKE 'SELECT name, current_setting%'",
      );
      expect(statements).toEqual([{ name: expect.stringMatching(/^r[0-9a-f]{24}$/), jit: 'off' }]);
    } finally {
      await reader.close();
    }
  });

  it('reads on after a migration changed the type of a column its statements return', async () => {
    const reader = createPreparedReader(url, { max: 1 });
    const ddl = new Client({ connectionString: url });
    await ddl.connect();
    try {
      await ddl.query('CREATE TABLE changing (v int); INSERT INTO changing VALUES (7)');
      expect(await reader.$queryRawUnsafe('SELECT v FROM changing')).toEqual([{ v: 7 }]);
      await ddl.query('ALTER TABLE changing ALTER COLUMN v TYPE text');
      expect(await reader.$queryRawUnsafe('SELECT v FROM changing')).toEqual([{ v: '7' }]);
      expect(await reader.$queryRawUnsafe('SELECT v FROM changing')).toEqual([{ v: '7' }]);
    } finally {
      await ddl.end();
      await reader.close();
    }
  });

  it("reads the URL's ?schema= as the search path", async () => {
    const reader = createPreparedReader(`${url}?schema=other`);
    try {
      expect(await reader.$queryRawUnsafe('SELECT n FROM t')).toEqual([{ n: 10 }]);
    } finally {
      await reader.close();
    }
    expect(() => createPreparedReader(`${url}?schema=a;b`)).toThrow(/schema name/);
  });

  it('fails a read on a server that is not there at once, with the socket error (a store outage to the bus)', async () => {
    const reader = createPreparedReader('postgresql://postgres@127.0.0.1:1/none');
    try {
      const failure = await reader.$queryRawUnsafe('SELECT 1').catch((err: unknown) => err);
      expect(failure).toMatchObject({ code: 'ECONNREFUSED' });
    } finally {
      await reader.close();
    }
  });
});
