import { Client, DatabaseError } from 'pg';
import { databaseNameOf, databaseUrlFor, pgConnectionString } from './url';

/** Namespace of the advisory locks that serialize database creation on one server. */
const CREATE_LOCK_NAMESPACE = 72707370;

/** A connection to the server's `postgres` maintenance database. */
async function connectMaintenance(databaseUrl: string): Promise<Client> {
  const client = new Client({ connectionString: pgConnectionString(databaseUrlFor(databaseUrl, 'postgres')) });
  await client.connect();
  return client;
}

function isAlreadyExistsError(err: unknown): boolean {
  // 42P04 duplicate_database; 23505 when two CREATE DATABASE race on pg_database's unique index.
  return err instanceof DatabaseError && (err.code === '42P04' || err.code === '23505');
}

/**
 * Creates the database named in `databaseUrl` unless it exists. Safe to call from several
 * processes at once. Returns true when this call created it.
 */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const name = databaseNameOf(databaseUrl);
  const client = await connectMaintenance(databaseUrl);
  try {
    const exists = async () =>
      (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount !== 0;
    if (await exists()) return false;
    // CREATE DATABASE cannot run in a transaction, so a session-level lock serializes creators.
    await client.query('SELECT pg_advisory_lock($1, hashtext($2))', [CREATE_LOCK_NAMESPACE, name]);
    try {
      if (await exists()) return false;
      try {
        await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
        return true;
      } catch (err) {
        if (isAlreadyExistsError(err)) return false;
        throw err;
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1, hashtext($2))', [CREATE_LOCK_NAMESPACE, name]);
    }
  } finally {
    await client.end();
  }
}

/** Drops the database named in `databaseUrl` if it exists, disconnecting its sessions (for tests). */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const name = databaseNameOf(databaseUrl);
  const client = await connectMaintenance(databaseUrl);
  try {
    await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}
