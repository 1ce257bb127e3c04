import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { connect, JSONCodec, type NatsConnection, type Subscription } from 'nats';
import { dropDatabase, ensureDatabase, migrate } from '@fleet/db';
import type { Principal, RequestEnvelope } from '@fleet/contracts';
import { Bus, createLogger, type Logger } from '@fleet/service-kit';
import { databaseUrl, uniqueId } from '@fleet/test-kit';
import { MIGRATIONS_DIR } from '../src/migrations';
import { openRegistryDb, type RegistryDb } from '../src/store/prisma';

/**
 * A private nats-server (JetStream on, its own store) for one test file: the registry's queue
 * group and the bridge stand-in can then never meet a running fleet's replicas on the shared server.
 */
export interface PrivateNats {
  url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export async function startPrivateNats(): Promise<PrivateNats> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'registry-nats-'));
  const bin = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';
  const child: ChildProcess = spawn(bin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
  const url = `nats://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      const nc = await connect({ servers: url, reconnect: false });
      await nc.close();
      break;
    } catch (err) {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw err;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url,
    stop: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface TestDb {
  url: string;
  db: RegistryDb;
  drop(): Promise<void>;
}

/** A migrated database of this test file's own. */
export async function createTestDb(): Promise<TestDb> {
  const url = databaseUrl(uniqueId('registry_test_'));
  await ensureDatabase(url);
  await migrate(url, MIGRATIONS_DIR);
  const db = openRegistryDb(url, 4);
  return {
    url,
    db,
    drop: async () => {
      await db.$disconnect();
      await dropDatabase(url);
    },
  };
}

export const logger: Logger = createLogger('device-registry-test', process.env.TEST_LOG_LEVEL ?? 'silent');

export async function connectBus(url: string, service = 'device-registry'): Promise<Bus> {
  return Bus.connect({ servers: url, service, logger, requestTimeoutMs: 3000 });
}

/**
 * Stands in for mqtt-bridge's credential subjects (the bridge is not under test here): records
 * every request and answers success, a broker refusal (503 broker_unavailable), or nothing.
 */
export class BridgeStandIn {
  readonly upserts: Record<string, unknown>[] = [];
  readonly deletes: Record<string, unknown>[] = [];
  mode: 'ok' | 'refuse' | 'silent' = 'ok';
  private readonly subs: Subscription[] = [];

  constructor(nc: NatsConnection) {
    const codec = JSONCodec<RequestEnvelope>();
    for (const [subject, log] of [
      ['bridge.credential.upsert', this.upserts],
      ['bridge.credential.delete', this.deletes],
    ] as const) {
      this.subs.push(
        nc.subscribe(subject, {
          callback: (_err, msg) => {
            if (this.mode === 'silent') return;
            const body = (codec.decode(msg.data).body ?? {}) as Record<string, unknown>;
            if (this.mode === 'refuse') {
              msg.respond(JSONCodec().encode({ ok: false, error: { status: 503, code: 'broker_unavailable', message: 'The broker refused.', retry_after: 1 } }));
              return;
            }
            log.push(body);
            msg.respond(JSONCodec().encode({ ok: true, status: 200, body: {} }));
          },
        }),
      );
    }
  }

  close(): void {
    for (const s of this.subs) s.unsubscribe();
  }
}

export function principal(overrides: Partial<Principal> = {}): Principal {
  return {
    partner_id: uniqueId('p'),
    name: 'Test partner',
    key_prefix: 'pk_test',
    permissions: [],
    org_grants: [],
    allowed_channels: ['light1', 'light2', 'light3', 'sound', 'contact'],
    limits: { requests_per_min: 600, device_commands_per_min: 60 },
    ...overrides,
  };
}
