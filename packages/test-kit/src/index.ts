import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { dropDatabase, ensureDatabase, migrate } from '@fleet/db';
import { startNatsServer } from '@fleet/launcher';
import type { RequestSubject } from '@fleet/contracts';

/** Where the local services are; tests take them from the environment, defaulting to this machine's. */
export const testEnv = {
  natsUrl: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  postgresUrl: process.env.POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres',
  mqttUrl: process.env.MQTT_URL ?? 'mqtt://127.0.0.1:1883',
};

import { uniqueId } from './unique-id';

export { uniqueId };

/**
 * A random device id in the spec's format (12 uppercase hex characters). It always holds a letter
 * (the first character is A-F): tests use its lower-case form as a different string (a
 * mismatched `confirm`, a topic no device owns), which an id of digits alone would not be.
 */
export function randomDeviceId(): string {
  const bytes = randomBytes(6);
  return `${'ABCDEF'[bytes[0]! % 6]}${bytes.toString('hex').toUpperCase().slice(1)}`;
}

export function databaseUrl(name: string, base = testEnv.postgresUrl): string {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Drops every database whose name starts with the prefix (a test run's leftovers). */
export async function dropDatabasesWithPrefix(prefix: string, base = testEnv.postgresUrl): Promise<void> {
  if (!/^[a-z0-9_]+$/.test(prefix)) throw new Error(`unsafe database prefix ${prefix}`);
  const client = new Client({ connectionString: base });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${prefix}%`]);
    for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** Polls until the check returns a value other than undefined/false, or fails after the timeout. */
export async function waitFor<T>(check: () => Promise<T | undefined | false> | T | undefined | false, options: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 5000);
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 50));
  }
  throw new Error(`timed out waiting for ${options.what ?? 'condition'}${last ? `: ${String(last)}` : ''}`);
}

export interface PrivateNats {
  url: string;
  stop(): Promise<void>;
}

/**
 * A private nats-server (JetStream on, its own store) for one test file or run: its queue
 * groups and streams never meet those of a fleet running on the machine's shared server.
 */
export function startPrivateNats(): Promise<PrivateNats> {
  return startNatsServer();
}

export interface TestDatabase<Db> {
  url: string;
  db: Db;
  /** Disconnects the client and drops the database. */
  drop(): Promise<void>;
}

/** A database of the test file's own (named with the prefix), migrated, with a client opened by `open`. */
export async function createMigratedTestDb<Db extends { $disconnect(): Promise<void> }>(
  prefix: string,
  migrationsDir: string,
  open: (url: string) => Db,
): Promise<TestDatabase<Db>> {
  const url = databaseUrl(uniqueId(prefix));
  await ensureDatabase(url);
  await migrate(url, migrationsDir);
  const db = open(url);
  return {
    url,
    db,
    drop: async () => {
      await db.$disconnect();
      await dropDatabase(url);
    },
  };
}

export { BridgeStandIn } from './bridge-stand-in';
export { RegistryStandIn } from './registry-stand-in';
export { LightStandIn } from './light-stand-in';
export { answersNotUnavailable, cuttableDatabase, type CuttableDatabase, type Requester } from './store-outage';

/**
 * A request subject that proto-schemas/subjects.json does not name, for tests of the bus itself
 * and of the gateway's pipeline with route rows of their own. The typed bus takes only known
 * subjects; this cast is the one door for a test's own, and it carries no body schema.
 */
export const testSubject = (name: string): RequestSubject => name as RequestSubject;

/** The error `work` rejects with, when it is of `type`; fails the test when it resolves or rejects otherwise. */
export async function rejectionOf<T extends Error>(work: Promise<unknown>, type: abstract new (...args: never[]) => T): Promise<T> {
  try {
    await work;
  } catch (err) {
    if (err instanceof type) return err;
    throw err;
  }
  throw new Error(`expected a rejection with ${type.name}`);
}
export { partnerId, principal } from './principal';
export { captureDeviceMessage, createDeviceInStream, type CapturedMessage } from './device-in-stream';
export { WebhookReceiver, type ReceivedDelivery } from './webhook-receiver';
