import { promises as fs } from 'node:fs';
import { PrismaPg } from '@prisma/adapter-pg';
import { Client } from 'pg';
import {
  CommitDeadlineError,
  commitBy,
  dropDatabase,
  ensureDatabase,
  installCommitGuard,
  isCommitDeadlineFailure,
  migrate,
  statementBy,
  transactionBy,
  type RawExecutor,
  type TransactionalClient,
} from '@fleet/db';
import { makeMigrationsDir, uniqueDatabaseUrl } from './support';

// The commit guard against the real local Postgres: through node-postgres directly, and through
// @prisma/adapter-pg's transactions exactly as the Prisma 7 client drives them (BEGIN on a pooled
// connection, the statements, then COMMIT sent with executeRaw). The services' integration tests
// cover the generated Prisma clients.

const DB_URL = uniqueDatabaseUrl('fleet_guardtest');
let client: Client;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  await ensureDatabase(DB_URL);
  client = new Client({ connectionString: DB_URL });
  await client.connect();
  await client.query('CREATE TABLE work (id text PRIMARY KEY)');
});

afterAll(async () => {
  await client?.end();
  await dropDatabase(DB_URL);
});

const pgExecutor = (c: Client): RawExecutor => ({
  $executeRawUnsafe: async (sql: string, ...values: unknown[]) => (await c.query(sql, values)).rowCount ?? 0,
});

async function stored(id: string): Promise<boolean> {
  return (await client.query('SELECT 1 FROM work WHERE id = $1', [id])).rowCount === 1;
}

async function guardRows(): Promise<number> {
  return Number((await client.query('SELECT count(*)::int AS n FROM fleet_kit.commit_deadline')).rows[0].n);
}

describe('installCommitGuard', () => {
  it('installs once, from several processes at once, and again without harm', async () => {
    await Promise.all([installCommitGuard(DB_URL), installCommitGuard(DB_URL), installCommitGuard(DB_URL)]);
    await installCommitGuard(client);
    const triggers = await client.query(
      `SELECT t.tgname, t.tgdeferrable, t.tginitdeferred FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'fleet_kit' AND c.relname = 'commit_deadline'`,
    );
    expect(triggers.rows).toEqual([{ tgname: 'commit_deadline_check_v1', tgdeferrable: true, tginitdeferred: true }]);
    const persistence = await client.query(`SELECT relpersistence FROM pg_class WHERE oid = 'fleet_kit.commit_deadline'::regclass`);
    expect(persistence.rows[0].relpersistence).toBe('u');
  });

  it('is installed by migrate()', async () => {
    const url = uniqueDatabaseUrl('fleet_guardtest');
    const dir = await makeMigrationsDir({});
    await ensureDatabase(url);
    try {
      await migrate(url, dir);
      const other = new Client({ connectionString: url });
      await other.connect();
      try {
        expect((await other.query(`SELECT to_regclass('fleet_kit.commit_deadline') IS NOT NULL AS ok`)).rows[0].ok).toBe(true);
      } finally {
        await other.end();
      }
    } finally {
      await dropDatabase(url);
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('commitBy (node-postgres)', () => {
  let session: Client;
  beforeAll(async () => {
    await installCommitGuard(DB_URL);
    session = new Client({ connectionString: DB_URL });
    await session.connect();
  });
  afterAll(() => session.end());

  it('a COMMIT before the deadline succeeds and leaves no guard row', async () => {
    await session.query('BEGIN');
    await commitBy(pgExecutor(session), Date.now() + 2_000);
    await session.query("INSERT INTO work VALUES ('before')");
    await session.query('COMMIT');
    expect(await stored('before')).toBe(true);
    expect(await guardRows()).toBe(0);
  });

  it('a COMMIT sent after the deadline fails with DL001 and rolls everything back', async () => {
    await session.query('BEGIN');
    await commitBy(pgExecutor(session), Date.now() + 300);
    await session.query("INSERT INTO work VALUES ('after')");
    await sleep(500);
    const failure = await session.query('COMMIT').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toMatchObject({ code: 'DL001' });
    expect(isCommitDeadlineFailure(failure)).toBe(true);
    expect(await stored('after')).toBe(false);
    expect(await guardRows()).toBe(0);
    // The session is usable again.
    expect((await session.query('SELECT 1 AS one')).rows[0].one).toBe(1);
  });

  it('keeps the earlier of two deadlines in one transaction', async () => {
    await session.query('BEGIN');
    await commitBy(pgExecutor(session), Date.now() + 300);
    await commitBy(pgExecutor(session), new Date(Date.now() + 60_000));
    await session.query("INSERT INTO work VALUES ('twice')");
    await sleep(500);
    await expect(session.query('COMMIT')).rejects.toMatchObject({ code: 'DL001' });
    expect(await stored('twice')).toBe(false);
  });

  it('leaves transactions without a deadline alone', async () => {
    await session.query('BEGIN');
    await session.query("INSERT INTO work VALUES ('unguarded')");
    await sleep(50);
    await session.query('COMMIT');
    expect(await stored('unguarded')).toBe(true);
  });
});

/**
 * A minimal client over @prisma/adapter-pg that runs interactive transactions the way the
 * Prisma 7 client's transaction manager does: startTransaction, the statements, then COMMIT
 * (or ROLLBACK) through executeRaw before releasing the connection.
 */
class AdapterClient implements TransactionalClient<RawExecutor> {
  private constructor(private readonly adapter: Awaited<ReturnType<PrismaPg['connect']>>) {}

  static async open(url: string): Promise<AdapterClient> {
    return new AdapterClient(await new PrismaPg({ connectionString: url, max: 2 }).connect());
  }

  private static executor(q: { executeRaw: AdapterClient['adapter']['executeRaw'] }): RawExecutor {
    return {
      $executeRawUnsafe: (sql: string, ...values: unknown[]) =>
        q.executeRaw({ sql, args: values, argTypes: values.map(() => ({ scalarType: 'string' as const, arity: 'scalar' as const })) }),
    };
  }

  $executeRawUnsafe(sql: string, ...values: unknown[]): Promise<number> {
    return AdapterClient.executor(this.adapter).$executeRawUnsafe(sql, ...values);
  }

  async $queryRawUnsafe<T>(sql: string): Promise<T> {
    const result = await this.adapter.queryRaw({ sql, args: [], argTypes: [] });
    return result.rows.map((row) => Object.fromEntries(result.columnNames.map((name, i) => [name, row[i]]))) as T;
  }

  async $transaction<R>(fn: (tx: RawExecutor) => Promise<R>): Promise<R> {
    const tx = await this.adapter.startTransaction();
    let result: R;
    try {
      result = await fn(AdapterClient.executor(tx));
    } catch (err) {
      await tx.executeRaw({ sql: 'ROLLBACK', args: [], argTypes: [] }).finally(() => tx.rollback());
      throw err;
    }
    await tx.executeRaw({ sql: 'COMMIT', args: [], argTypes: [] }).then(
      () => tx.commit(),
      (err: unknown) => tx.rollback().then(() => Promise.reject(err)),
    );
    return result;
  }

  dispose(): Promise<void> {
    return this.adapter.dispose();
  }
}

describe('statementBy (one statement that commits on its own)', () => {
  let db: AdapterClient;
  beforeAll(async () => {
    db = await AdapterClient.open(DB_URL);
  });
  afterAll(() => db.dispose());

  it('commits a statement that ends before the deadline, after the commit notice, leaving no guard row', async () => {
    const order: string[] = [];
    const window = { deadline: Date.now() + 2_000, beforeCommit: async () => void order.push('notice') };
    await statementBy(db, window, async (guard) => {
      order.push('statement');
      return db.$executeRawUnsafe(`WITH ${guard}, w AS (INSERT INTO work VALUES ($1)) SELECT 1`, 'stmt-before');
    });
    expect(order).toEqual(['notice', 'statement']);
    expect(await stored('stmt-before')).toBe(true);
    expect(await guardRows()).toBe(0);
  });

  it('rolls back a statement that is still running at its deadline, and says so', async () => {
    const deadline = Date.now() + 200;
    const failure = await statementBy(db, deadline, (guard) =>
      db.$executeRawUnsafe(`WITH ${guard}, w AS (INSERT INTO work VALUES ($1)) SELECT pg_sleep(0.4)`, 'stmt-after'),
    ).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(CommitDeadlineError);
    expect(isCommitDeadlineFailure((failure as Error).cause)).toBe(true);
    expect(await stored('stmt-after')).toBe(false);
    expect(await guardRows()).toBe(0);
  });

  it('does not send a statement whose deadline has passed', async () => {
    const run = jest.fn(async () => 0);
    await expect(statementBy(db, Date.now() - 1, run)).rejects.toBeInstanceOf(CommitDeadlineError);
    expect(run).not.toHaveBeenCalled();
  });
});

describe('transactionBy (through @prisma/adapter-pg)', () => {
  let db: AdapterClient;
  beforeAll(async () => {
    db = await AdapterClient.open(DB_URL);
  });
  afterAll(() => db.dispose());

  it('commits work that reaches COMMIT before the deadline', async () => {
    const out = await transactionBy(db, Date.now() + 2_000, async (tx) => {
      await tx.$executeRawUnsafe('INSERT INTO work VALUES ($1)', 'adapter-before');
      return 'done';
    });
    expect(out).toBe('done');
    expect(await stored('adapter-before')).toBe(true);
    expect(await guardRows()).toBe(0);
  });

  it('rolls back work whose COMMIT is sent after the deadline (a stalled service) and says so', async () => {
    const deadline = Date.now() + 300;
    const failure = await transactionBy(db, deadline, async (tx) => {
      await tx.$executeRawUnsafe('INSERT INTO work VALUES ($1)', 'adapter-after');
      await sleep(500);
    }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(CommitDeadlineError);
    expect(failure).toMatchObject({ code: 'deadline_exceeded', deadline });
    expect(isCommitDeadlineFailure((failure as Error).cause)).toBe(true);
    expect(await stored('adapter-after')).toBe(false);
    expect(await guardRows()).toBe(0);
  });

  it('does not begin when the deadline has already passed', async () => {
    const work = jest.fn(async () => undefined);
    await expect(transactionBy(db, Date.now() - 1, work)).rejects.toBeInstanceOf(CommitDeadlineError);
    expect(work).not.toHaveBeenCalled();
  });

  it('passes other failures through unchanged', async () => {
    await expect(
      transactionBy(db, Date.now() + 2_000, async () => {
        throw new RangeError('not mine');
      }),
    ).rejects.toBeInstanceOf(RangeError);
  });

  it('installs the guard itself when migrate() did not run', async () => {
    const url = uniqueDatabaseUrl('fleet_guardtest');
    await ensureDatabase(url);
    const fresh = await AdapterClient.open(url);
    try {
      await fresh.$executeRawUnsafe('CREATE TABLE work (id text PRIMARY KEY)');
      await transactionBy(fresh, Date.now() + 2_000, (tx) => tx.$executeRawUnsafe("INSERT INTO work VALUES ('x')"));
      await expect(
        transactionBy(fresh, Date.now() + 200, async (tx) => {
          await tx.$executeRawUnsafe("INSERT INTO work VALUES ('y')");
          await sleep(400);
        }),
      ).rejects.toBeInstanceOf(CommitDeadlineError);
      expect(await fresh.$queryRawUnsafe('SELECT id FROM work ORDER BY id')).toEqual([{ id: 'x' }]);
    } finally {
      await fresh.dispose();
      await dropDatabase(url);
    }
  });
});

