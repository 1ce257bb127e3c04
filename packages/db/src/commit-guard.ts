/**
 * Deadlines enforced by Postgres at COMMIT.
 *
 * A request's caller stops waiting at the request's deadline and may tell its partner that
 * nothing happened. Work for the request must therefore never commit after the deadline. A
 * check in the service ("is there time left?") is not enough: the process can stall (paused,
 * swapped out, a long GC) between the check and the COMMIT. So the check runs inside Postgres,
 * at commit time: `commitBy(tx, deadline)` inserts a row into `fleet_kit.commit_deadline`
 * (UNLOGGED) whose DEFERRABLE INITIALLY DEFERRED constraint trigger runs while the transaction
 * commits, deletes the row again and raises when `clock_timestamp()` is past the deadline, which
 * rolls the whole transaction back. A COMMIT that reaches Postgres after the deadline fails; one
 * that reached it before succeeds.
 *
 * Deadlines are wall-clock instants (epoch milliseconds) set by one host and compared with the
 * database server's clock: clocks must be kept in sync (NTP); a skew moves the cut-off by as much.
 */
import { Client } from 'pg';
import { pgConnectionString } from './url';

/** The schema of the guard's table, function and trigger. */
export const COMMIT_GUARD_SCHEMA = 'fleet_kit';

/** SQLSTATE the guard raises (class "DL", not used by Postgres). */
export const COMMIT_DEADLINE_SQLSTATE = 'DL001';

/** Advisory lock key that serializes installers (beside Prisma's 72707369 and database creation's 72707370). */
const INSTALL_LOCK_KEY = 72707371;

const TRIGGER = 'commit_deadline_check_v1';

/** Statements that install the guard; each is idempotent. Run under INSTALL_LOCK_KEY. */
const INSTALL_STATEMENTS = [
  `CREATE SCHEMA IF NOT EXISTS ${COMMIT_GUARD_SCHEMA}`,
  `CREATE UNLOGGED TABLE IF NOT EXISTS ${COMMIT_GUARD_SCHEMA}.commit_deadline (
    txid xid8 PRIMARY KEY DEFAULT pg_current_xact_id(),
    deadline timestamptz NOT NULL
  )`,
  `CREATE OR REPLACE FUNCTION ${COMMIT_GUARD_SCHEMA}.${TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $guard$
DECLARE
  cutoff timestamptz;
BEGIN
  DELETE FROM ${COMMIT_GUARD_SCHEMA}.commit_deadline WHERE txid = NEW.txid RETURNING deadline INTO cutoff;
  IF cutoff IS NOT NULL AND clock_timestamp() > cutoff THEN
    RAISE EXCEPTION 'commit deadline % passed % before COMMIT; rolled back', cutoff, clock_timestamp() - cutoff
      USING ERRCODE = '${COMMIT_DEADLINE_SQLSTATE}';
  END IF;
  RETURN NULL;
END
$guard$`,
  // Constraint triggers have neither IF NOT EXISTS nor OR REPLACE.
  `DO $install$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = '${TRIGGER}' AND tgrelid = '${COMMIT_GUARD_SCHEMA}.commit_deadline'::regclass) THEN
    CREATE CONSTRAINT TRIGGER ${TRIGGER} AFTER INSERT ON ${COMMIT_GUARD_SCHEMA}.commit_deadline
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${COMMIT_GUARD_SCHEMA}.${TRIGGER}();
  END IF;
END
$install$`,
];

/** True when the guard's trigger exists (and with it the table and function). */
const INSTALLED_QUERY = `SELECT EXISTS (
  SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = '${COMMIT_GUARD_SCHEMA}' AND c.relname = 'commit_deadline' AND t.tgname = '${TRIGGER}'
) AS installed`;

/**
 * Installs the guard in the database if it is not there yet. Idempotent and safe from several
 * processes at once. `migrate()` calls it, so every service has it from its start.
 */
export async function installCommitGuard(target: string | Client): Promise<void> {
  const client = typeof target === 'string' ? new Client({ connectionString: pgConnectionString(target) }) : target;
  if (typeof target === 'string') await client.connect();
  try {
    if ((await client.query<{ installed: boolean }>(INSTALLED_QUERY)).rows[0]?.installed) return;
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1)', [INSTALL_LOCK_KEY]);
      for (const sql of INSTALL_STATEMENTS) await client.query(sql);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  } finally {
    if (typeof target === 'string') await client.end();
  }
}

/** What the guard needs of a Prisma client or of the transaction client inside `$transaction`. */
export interface RawExecutor {
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
}

/** A Prisma client: raw statements and interactive transactions. */
export interface TransactionalClient<Tx> extends RawExecutor {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
  $transaction<R>(fn: (tx: Tx) => Promise<R>, options?: TransactionOptions): Promise<R>;
}

export interface TransactionOptions {
  /** Longest wait for a pooled connection; never longer than the time left (Prisma default 2000). */
  maxWait?: number;
  /** Longest the interactive transaction may stay open (Prisma default 5000). */
  timeout?: number;
}

/**
 * The transaction's deadline passed before it committed: it was rolled back (or never began),
 * so nothing was stored. `code` lets the service kit answer it as a 503 without this package
 * knowing HTTP.
 */
export class CommitDeadlineError extends Error {
  readonly code = 'deadline_exceeded';

  constructor(
    readonly deadline: number,
    options?: { cause?: unknown },
  ) {
    super(`The deadline ${new Date(deadline).toISOString()} passed before the transaction committed; nothing was stored.`, options);
    this.name = 'CommitDeadlineError';
  }
}

/**
 * Inside a transaction: COMMIT only until `deadline` (epoch milliseconds or a Date). A COMMIT
 * that reaches Postgres later fails with SQLSTATE DL001 and the whole transaction is rolled
 * back. Calling it twice keeps the earlier deadline. Needs the guard installed
 * (installCommitGuard; `transactionBy` makes sure of it).
 */
export async function commitBy(tx: RawExecutor, deadline: number | Date): Promise<void> {
  const at = deadline instanceof Date ? deadline : new Date(deadline);
  await tx.$executeRawUnsafe(
    `INSERT INTO ${COMMIT_GUARD_SCHEMA}.commit_deadline (deadline) VALUES ($1::timestamptz)
     ON CONFLICT (txid) DO UPDATE SET deadline = LEAST(${COMMIT_GUARD_SCHEMA}.commit_deadline.deadline, EXCLUDED.deadline)`,
    at.toISOString(),
  );
}

const ensured = new WeakMap<object, Promise<void>>();

/** Installs the guard through this client once per process (migrate() normally did at start). */
export function ensureCommitGuard(db: TransactionalClient<RawExecutor>): Promise<void> {
  let done = ensured.get(db);
  if (!done) {
    done = (async () => {
      const rows = await db.$queryRawUnsafe<Array<{ installed: boolean }>>(INSTALLED_QUERY);
      if (rows[0]?.installed) return;
      await db.$transaction(async (tx) => {
        await tx.$executeRawUnsafe(`SELECT pg_advisory_xact_lock(${INSTALL_LOCK_KEY})`);
        for (const sql of INSTALL_STATEMENTS) await tx.$executeRawUnsafe(sql);
      });
    })();
    done.catch(() => ensured.delete(db));
    ensured.set(db, done);
  }
  return done;
}

/**
 * When a request's work may commit: its deadline and, optionally, what to do right before the
 * COMMIT is sent (the service kit's HandlerContext is one: it tells the caller that the work may
 * be stored from then on).
 */
export interface CommitWindow {
  deadline: number;
  beforeCommit?(): Promise<void>;
}

/**
 * `db.$transaction(work)` that commits only until the deadline (epoch milliseconds): the one
 * line a handler needs to store work for a request, e.g.
 * `await transactionBy(db, ctx, (tx) => renameDevice(tx, id, name))`. With a CommitWindow,
 * its `beforeCommit` runs after the work, right before Prisma sends the COMMIT.
 * Throws CommitDeadlineError when the deadline has passed before the start or at COMMIT (then
 * nothing was stored); other errors pass through.
 */
export async function transactionBy<Tx extends RawExecutor, R>(
  db: TransactionalClient<Tx>,
  window: number | CommitWindow,
  work: (tx: Tx) => Promise<R>,
  options: TransactionOptions = {},
): Promise<R> {
  const { deadline, beforeCommit } = typeof window === 'number' ? { deadline: window, beforeCommit: undefined } : window;
  if (Date.now() >= deadline) throw new CommitDeadlineError(deadline);
  await ensureCommitGuard(db as unknown as TransactionalClient<RawExecutor>);
  const remaining = deadline - Date.now();
  if (remaining <= 0) throw new CommitDeadlineError(deadline);
  try {
    return await db.$transaction(
      async (tx) => {
        await commitBy(tx, deadline);
        const result = await work(tx);
        await beforeCommit?.();
        return result;
      },
      { ...options, maxWait: Math.max(1, Math.min(options.maxWait ?? 2_000, remaining)) },
    );
  } catch (err) {
    if (isCommitDeadlineFailure(err) || (Date.now() >= deadline && isTransactionTimeout(err))) {
      throw new CommitDeadlineError(deadline, { cause: err });
    }
    throw err;
  }
}

/**
 * Work that is a single statement, committed on its own, only until the deadline: one round trip
 * instead of a transaction's BEGIN, deadline, work and COMMIT. `run` sends its statement with
 * `guard` as the first entry of its WITH list (`WITH ${guard}, …`): a CTE that records the
 * deadline, which the guard's trigger checks when the statement commits (DL001 after it).
 * The commit notice, if any, is sent before the statement.
 */
export async function statementBy<R>(db: TransactionalClient<RawExecutor>, window: number | CommitWindow, run: (guard: string) => Promise<R>): Promise<R> {
  const { deadline, beforeCommit } = typeof window === 'number' ? { deadline: window, beforeCommit: undefined } : window;
  if (Date.now() >= deadline) throw new CommitDeadlineError(deadline);
  await ensureCommitGuard(db);
  await beforeCommit?.();
  // The deadline is a number the caller computed, written as a literal (no parameter to number).
  const guard = `commit_guard AS (INSERT INTO ${COMMIT_GUARD_SCHEMA}.commit_deadline (deadline) VALUES ('${new Date(deadline).toISOString()}'::timestamptz))`;
  try {
    return await run(guard);
  } catch (err) {
    if (isCommitDeadlineFailure(err)) throw new CommitDeadlineError(deadline, { cause: err });
    throw err;
  }
}

/** Fields a driver, driver-adapter or Prisma error may carry. */
interface ErrorLike {
  code?: unknown;
  name?: unknown;
  message?: unknown;
  cause?: unknown;
  meta?: { driverAdapterError?: { cause?: { kind?: unknown; code?: unknown } } };
}

/** The error and its causes (Prisma and the driver adapter wrap the driver's error). */
function* chain(err: unknown): Generator<ErrorLike> {
  const seen = new Set<unknown>();
  let e = err;
  while (e && typeof e === 'object' && !seen.has(e)) {
    seen.add(e);
    yield e as ErrorLike;
    e = (e as ErrorLike).cause;
  }
}

/** The guard refused the COMMIT (SQLSTATE DL001), however the error was wrapped. */
export function isCommitDeadlineFailure(err: unknown): boolean {
  if (err instanceof CommitDeadlineError) return true;
  for (const e of chain(err)) {
    if (e.code === COMMIT_DEADLINE_SQLSTATE || e.meta?.driverAdapterError?.cause?.code === COMMIT_DEADLINE_SQLSTATE) return true;
    if (typeof e.message === 'string' && e.message.includes('commit deadline') && e.message.includes('rolled back')) return true;
  }
  return false;
}

/** Prisma could not start the transaction in time, or closed it because it ran too long. */
function isTransactionTimeout(err: unknown): boolean {
  for (const e of chain(err)) {
    if (e.code === 'P2028' || e.meta?.driverAdapterError?.cause?.kind === 'TransactionStartTimeout') return true;
  }
  return false;
}

