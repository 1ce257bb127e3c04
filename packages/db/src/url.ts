/** Helpers for PostgreSQL connection URLs (postgres:// or postgresql://). */

function parse(databaseUrl: string): URL {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    throw new Error('Invalid database URL (expected postgresql://user@host:port/database)');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new Error(`Unsupported database URL protocol "${url.protocol}" (expected postgres: or postgresql:)`);
  }
  return url;
}

/** The database name in the URL's path. Throws when the URL names none. */
export function databaseNameOf(databaseUrl: string): string {
  const name = decodeURIComponent(parse(databaseUrl).pathname.replace(/^\//, ''));
  if (!name) throw new Error('The database URL does not name a database');
  return name;
}

/** Same server, credentials and query parameters, another database name. */
export function databaseUrlFor(baseUrl: string, databaseName: string): string {
  if (!databaseName) throw new Error('databaseName must not be empty');
  const url = parse(baseUrl);
  url.pathname = '/' + encodeURIComponent(databaseName);
  return url.toString();
}

/** The Prisma-style `?schema=` parameter of the URL, if any. */
export function schemaOf(databaseUrl: string): string | undefined {
  return parse(databaseUrl).searchParams.get('schema') || undefined;
}

/** The URL without the Prisma-only `schema` parameter, for node-postgres. */
export function pgConnectionString(databaseUrl: string): string {
  const url = parse(databaseUrl);
  if (!url.searchParams.has('schema')) return databaseUrl;
  url.searchParams.delete('schema');
  return url.toString();
}
