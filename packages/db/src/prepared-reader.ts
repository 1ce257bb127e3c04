import { createHash } from 'node:crypto';
import { Pool } from 'pg';
import { pgConnectionString, schemaOf } from './url';
import type { PrismaClientOptions } from './prisma';

/**
 * Raw reads on node-postgres with server-side prepared statements, for a service's hottest
 * read queries. The same `$queryRawUnsafe` as a Prisma client, so a store function takes either:
 * each distinct SQL text is parsed once per connection, under a name derived from it, and after
 * five runs Postgres keeps a generic plan where that costs no more than planning each time;
 * Prisma's driver adapter parses and plans every query anew. On the meter's large reads that
 * was 2 to 4 ms each.
 *
 * Values come back as node-postgres gives them (bigint and numeric as text): callers convert.
 * Only queries whose text is fixed (values bound as parameters) belong here: one prepared
 * statement per distinct text and connection.
 */
export interface PreparedReader {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
  /** Closes the pool. */
  close(): Promise<void>;
}

/** How long a read waits for a connection before failing (a store outage: 503, not a hang). */
const CONNECT_TIMEOUT_MS = 5000;
const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function createPreparedReader(databaseUrl: string, opts: PrismaClientOptions = {}): PreparedReader {
  const schema = opts.schema ?? schemaOf(databaseUrl);
  if (schema !== undefined && !SCHEMA_NAME.test(schema)) throw new Error(`Unsupported schema name "${schema}"`);
  const options = [opts.startupOptions, schema !== undefined ? `-c search_path=${schema}` : undefined].filter(Boolean).join(' ');
  const pool = new Pool({
    connectionString: pgConnectionString(databaseUrl),
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    ...(opts.max !== undefined ? { max: opts.max } : {}),
    ...(options ? { options } : {}),
  });
  // An idle connection the server dropped: the pool discards it and the next read opens another.
  pool.on('error', () => undefined);
  const names = new Map<string, string>();
  const nameOf = (text: string): string => {
    let name = names.get(text);
    if (name === undefined) {
      name = `r${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
      names.set(text, name);
    }
    return name;
  };
  const read = async <T>(text: string, values: unknown[]): Promise<T> => (await pool.query({ name: nameOf(text), text, values })).rows as T;
  return {
    async $queryRawUnsafe<T>(query: string, ...values: unknown[]): Promise<T> {
      try {
        return await read<T>(query, values);
      } catch (err) {
        if (!isStalePlan(err)) throw err;
        // A migration changed what the statement returns (a column's type) since a connection
        // prepared it: the text is prepared again under a new name on every connection.
        names.set(query, `${nameOf(query).slice(0, 25)}_${Date.now().toString(36)}`);
        return read<T>(query, values);
      }
    },
    close: () => pool.end(),
  };
}

/** Postgres refusing a prepared statement whose result type a schema change altered. */
function isStalePlan(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return code === '0A000' && typeof message === 'string' && message.includes('cached plan must not change result type');
}
