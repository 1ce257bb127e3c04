import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { dropDatabase, ensureDatabase, migrate } from '@fleet/db';
import { Bus, createLogger } from '@fleet/service-kit';
import { cuttableDatabase, databaseUrl, testEnv, uniqueId, waitFor, type CuttableDatabase } from '@fleet/test-kit';
import { AuthChangeListener } from '../../src/auth/change-listener';
import { Authenticator } from '../../src/auth/authenticator';
import { runAdminCommand } from '../../src/admin/commands';
import { readGatewayConfig } from '../../src/config';
import { createGatewayApp, type GatewayParts } from '../../src/gateway';
import { OpenStreams } from '../../src/http/stream';
import { MIGRATIONS_DIR } from '../../src/migrations';
import type { RouteDef } from '../../src/routes/types';
import { findKey } from '../../src/store/partners';
import { openGatewayDb, type GatewayDb } from '../../src/store/prisma';
import { openGatewayRedis } from '../../src/store/redis';

export interface TestGateway {
  url: string;
  db: GatewayDb;
  bus: Bus;
  redis: Redis;
  unique: string;
  /** With `cuttableDatabase`: the proxy between the gateway and its database (staff commands bypass it). */
  proxy?: CuttableDatabase;
  /** With `cuttableRedis`: the proxy between the gateway and Redis. */
  redisProxy?: CuttableDatabase;
  /** Runs a staff command exactly as the admin CLI does. */
  admin(...argv: string[]): Promise<Record<string, unknown>>;
  /** A partner and one key for it. */
  partner(flags?: string[]): Promise<{ id: string; key: string; keyPrefix: string }>;
  close(): Promise<void>;
}

/**
 * The gateway app as main.ts wires it, on an ephemeral port, with real Postgres (its own
 * database), Redis (its own key prefix) and NATS, and a route table of the test's choosing.
 */
export async function startTestGateway(
  routes: RouteDef[],
  env: Record<string, string> = {},
  options: { cuttableDatabase?: boolean; cuttableRedis?: boolean } & Pick<GatewayParts, 'streams' | 'streamTimeouts'> = {},
): Promise<TestGateway> {
  const unique = uniqueId('gw');
  const dbUrl = databaseUrl(`fleet_test_${unique}`);
  const config = readGatewayConfig({ HEALTH_PORT: '0', DATABASE_URL: dbUrl, REDIS_KEY_PREFIX: `${unique}:`, ...env });
  await ensureDatabase(dbUrl);
  await migrate(dbUrl, MIGRATIONS_DIR);
  const proxy = options.cuttableDatabase ? await cuttableDatabase(dbUrl) : undefined;
  const gatewayDbUrl = proxy?.url ?? dbUrl;
  const db = openGatewayDb(dbUrl);
  const gatewayDb = proxy ? openGatewayDb(gatewayDbUrl) : db;
  const logger = createLogger('gateway-test', process.env.TEST_LOG_LEVEL ?? 'silent');
  const redisProxy = options.cuttableRedis ? await cuttableDatabase(testEnv.redisUrl) : undefined;
  // Built and connected as main.ts does (its command timeout included).
  const redis = openGatewayRedis(redisProxy?.url ?? testEnv.redisUrl);
  await redis.connect();
  // Its own subject prefix: the test serves the registry's and its routes' subjects on it.
  const bus = await Bus.connect({ servers: testEnv.natsUrl, service: `gateway-${unique}`, logger, requestTimeoutMs: 1000, subjectPrefix: `${unique}.` });
  const authenticator = new Authenticator((prefix) => findKey(gatewayDb, prefix), () => listener.live);
  const streams = options.streams ?? new OpenStreams();
  let changesHeard = 0;
  const listener = new AuthChangeListener(
    gatewayDbUrl,
    () => {
      changesHeard++;
      authenticator.forgetAll();
      void streams.recheck();
    },
    logger,
  );
  await listener.start();
  const app = createGatewayApp({
    config,
    routes,
    authenticator,
    redis,
    bus,
    logger,
    streams,
    ...(options.streamTimeouts ? { streamTimeouts: options.streamTimeouts } : {}),
  });
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  // The staff CLI is its own process: by the time it has exited, the gateway has long heard
  // the change it announced. Run in the gateway's own process, the next request can reach the
  // gateway before the notification does, so a write waits until the gateway has heard it.
  const admin = async (...argv: string[]) => {
    const before = changesHeard;
    const answer = await runAdminCommand(db, argv);
    if (ANNOUNCED_WRITES.has(`${argv[0]} ${argv[1]}`)) {
      await waitFor(() => changesHeard > before, { what: `the gateway to hear ${argv.slice(0, 2).join(' ')}` });
    }
    return answer;
  };
  return {
    url,
    db,
    bus,
    redis,
    unique,
    ...(proxy ? { proxy } : {}),
    ...(redisProxy ? { redisProxy } : {}),
    admin,
    async partner(flags = []) {
      const created = await admin('partner', 'create', '--name', `Partner ${uniqueId()}`, ...flags);
      const issued = await admin('key', 'issue', '--partner', String(created.id));
      return { id: String(created.id), key: String(issued.key), keyPrefix: String(issued.key_prefix) };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await listener.stop();
      await bus.drain();
      const keys = await redis.keys(`${unique}:*`);
      if (keys.length) await redis.del(...keys);
      redis.disconnect();
      if (gatewayDb !== db) await gatewayDb.$disconnect();
      await db.$disconnect();
      await proxy?.close();
      await redisProxy?.close();
      await dropDatabase(dbUrl);
    },
  };
}

/** Staff commands that announce a change of partners or keys to the gateways. */
const ANNOUNCED_WRITES = new Set(['partner create', 'partner update', 'partner disable', 'key issue', 'key revoke']);

export interface CallResult {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

/** One HTTP call; JSON bodies are sent as given (a string is sent verbatim). */
export async function call(
  url: string,
  method: string,
  path: string,
  options: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<CallResult> {
  const headers: Record<string, string> = { ...(options.key ? { Authorization: `Bearer ${options.key}` } : {}), ...options.headers };
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const res = await fetch(`${url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  if (text) {
    try {
      parsed = JSON.parse(text) as Record<string, unknown>;
    } catch {
      parsed = { raw: text };
    }
  }
  return { status: res.status, headers: res.headers, body: parsed };
}
