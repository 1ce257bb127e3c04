import { PrismaPg } from '@prisma/adapter-pg';
import { pgConnectionString, schemaOf } from './url';

export interface PrismaClientOptions {
  /** Schema for the generated queries; defaults to the URL's `?schema=` parameter, else `public`. */
  schema?: string;
  /** Maximum size of the connection pool (node-postgres default: 10). */
  max?: number;
  /**
   * Server settings for every connection of the pool, as libpq's `options` (e.g. `-c jit=off`):
   * for settings a service needs on all its queries, whatever the server's defaults.
   */
  startupOptions?: string;
  /**
   * Bounds on waiting for the database (node-postgres waits forever by default): for a new
   * connection, and for a query's answer. A database that accepts connections but does not
   * answer (a paused process, a partition) then fails the query, and the pool drops that
   * connection, instead of leaving the caller waiting.
   */
  connectionTimeoutMs?: number;
  queryTimeoutMs?: number;
}

/**
 * Builds a Prisma 7 client (generated with the `prisma-client` generator) on the node-postgres
 * driver adapter: no query engine binary is involved.
 */
export function createPrismaClient<T>(
  ClientClass: new (opts: { adapter: PrismaPg }) => T,
  databaseUrl: string,
  opts: PrismaClientOptions = {},
): T {
  const schema = opts.schema ?? schemaOf(databaseUrl);
  const adapter = new PrismaPg(
    {
      connectionString: pgConnectionString(databaseUrl),
      ...(opts.max !== undefined ? { max: opts.max } : {}),
      ...(opts.startupOptions !== undefined ? { options: opts.startupOptions } : {}),
      ...(opts.connectionTimeoutMs !== undefined ? { connectionTimeoutMillis: opts.connectionTimeoutMs } : {}),
      ...(opts.queryTimeoutMs !== undefined ? { query_timeout: opts.queryTimeoutMs } : {}),
    },
    schema !== undefined ? { schema } : undefined,
  );
  return new ClientClass({ adapter });
}
