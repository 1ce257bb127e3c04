/**
 * Request deadlines in the registry, on a real Postgres database through the generated Prisma 7
 * client (adapter-pg interactive transactions): work that reaches COMMIT after the request's
 * deadline is rolled back by the database, provisioning then takes the broker credential back,
 * and a retry provisions normally. The registry's own process stalling is played by a broker
 * stand-in whose answer comes only after the deadline (as when the process was paused while the
 * bridge answered).
 */
import { randomBytes } from 'node:crypto';
import { CommitDeadlineError, transactionBy } from '@fleet/db';
import type { Principal, RequestEnvelope } from '@fleet/contracts';
import { ApiError, Bus, isDeadlineExceeded, type HandlerContext, type HandlerResult } from '@fleet/service-kit';
import { randomDeviceId, uniqueId } from '@fleet/test-kit';
import type { BrokerCredentials, CallFor } from '@fleet/bridge-client';
import { deriveBrokerPassword } from '../src/domain/crypto';
import type { Product } from '../src/domain/products';
import { registryHandlers, serveRegistry } from '../src/handlers/registry';
import { openRegistryDb } from '../src/store/prisma';
import { connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb } from './support';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const admin: Principal = principal({ permissions: ['access_all_devices', 'device_provisioning'] });

/** Broker credentials held in memory; each call can be held back. */
class SlowBroker implements BrokerCredentials {
  readonly credentials = new Map<string, string>();
  readonly removed: string[] = [];
  /** Delay of the next upsert answers, taken in order. */
  upsertDelays: number[] = [];

  async setCredential(_call: CallFor, credential: { device_id: string; product: Product; password: string }): Promise<void> {
    this.credentials.set(credential.device_id, credential.password);
    await sleep(this.upsertDelays.shift() ?? 0);
  }

  async removeCredential(_call: CallFor, deviceId: string): Promise<void> {
    this.credentials.delete(deviceId);
    this.removed.push(deviceId);
  }
}

let testDb: TestDb;
let broker: SlowBroker;
let handlers: ReturnType<typeof registryHandlers>;

beforeAll(async () => {
  testDb = await createTestDb();
  broker = new SlowBroker();
  handlers = registryHandlers({ db: testDb.db, broker, kek: randomBytes(32), logger });
});

afterAll(async () => {
  await testDb?.drop();
});

function ctx(deadline: number): HandlerContext {
  return { logger, deadline, remainingMs: () => Math.max(0, deadline - Date.now()), beforeCommit: async () => undefined };
}

function provisionRequest(id: string): RequestEnvelope {
  return { request_id: uniqueId('req'), principal: admin, params: { device_id: id }, query: {}, body: { credential_format: 'derived-v1' } };
}

async function outcome(work: Promise<HandlerResult>): Promise<HandlerResult | ApiError> {
  return work.catch((err: unknown) => {
    if (err instanceof ApiError) return err;
    throw err;
  });
}

const stored = async (id: string) => (await testDb.db.device.findUnique({ where: { deviceId: id } })) !== null;
/** The outbox events of one device (no relay runs here: they stay). */
const eventsOf = (id: string) => testDb.db.outboxEvent.count({ where: { payload: { path: ['device_id'], equals: id } } });

describe('transactionBy through the generated Prisma client', () => {
  it('commits before the deadline and rolls back a COMMIT sent after it', async () => {
    const id = randomDeviceId();
    await transactionBy(testDb.db, Date.now() + 2_000, (tx) =>
      tx.device.create({ data: { deviceId: id, product: 'light', orgNodeId: 1, credentialSource: 'generate', status: 'disconnected' } }),
    );
    const failure = await transactionBy(testDb.db, Date.now() + 300, async (tx) => {
      await tx.device.update({ where: { deviceId: id }, data: { name: 'too late' } });
      await sleep(500);
    }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(CommitDeadlineError);
    expect((await testDb.db.device.findUniqueOrThrow({ where: { deviceId: id } })).name).toBeNull();
  });
});

describe('provisioning against its deadline', () => {
  it('answers 201 when the commit makes the deadline', async () => {
    const id = randomDeviceId();
    const result = await outcome(handlers['registry.device.provision'](provisionRequest(id), ctx(Date.now() + 2_000)));
    expect(result).toMatchObject({ status: 201, body: { device_id: id, password: expect.any(String) } });
    expect(await stored(id)).toBe(true);
    expect(broker.credentials.has(id)).toBe(true);
  });

  it('stores nothing and takes the credential back when the commit would come after the deadline; a retry then succeeds', async () => {
    const id = randomDeviceId();
    broker.upsertDelays = [500];
    const late = await outcome(handlers['registry.device.provision'](provisionRequest(id), ctx(Date.now() + 300)));
    expect(late).toBeInstanceOf(ApiError);
    expect(late).toMatchObject({ status: 503, code: 'service_unavailable', message: expect.stringMatching(/nothing was stored/) });
    expect(await stored(id)).toBe(false);
    expect(await eventsOf(id)).toBe(0);
    expect(broker.credentials.has(id)).toBe(false);
    expect(broker.removed).toContain(id);

    const retry = await outcome(handlers['registry.device.provision'](provisionRequest(id), ctx(Date.now() + 2_000)));
    expect(retry).toMatchObject({ status: 201, body: { device_id: id, password: expect.any(String) } });
    expect(broker.credentials.has(id)).toBe(true);
    expect(await eventsOf(id)).toBe(1);
  });

  it('keeps the credential of a retry that committed while the late attempt was rolling back', async () => {
    const id = randomDeviceId();
    broker.upsertDelays = [500, 0];
    const late = handlers['registry.device.provision'](provisionRequest(id), ctx(Date.now() + 300));
    await sleep(100);
    // The retry waits for the id's lock, then provisions while the first attempt compensates.
    const retry = handlers['registry.device.provision'](provisionRequest(id), ctx(Date.now() + 3_000));
    const [first, second] = await Promise.all([outcome(late), outcome(retry)]);
    expect(first).toMatchObject({ status: 503 });
    expect(second).toMatchObject({ status: 201 });
    const password = ((second as HandlerResult).body as { password?: string } | undefined)?.password as string;
    expect(await stored(id)).toBe(true);
    // The broker holds the retry's credential: the late attempt's compensation left it alone.
    expect(broker.credentials.get(id)).toBe(deriveBrokerPassword(password, id, 'light'));
  });

  it('does not begin when the deadline has passed', async () => {
    const id = randomDeviceId();
    const removedBefore = broker.removed.length;
    await expect(handlers['registry.device.provision'](provisionRequest(id), ctx(Date.now() - 1))).rejects.toBeInstanceOf(CommitDeadlineError);
    expect(broker.credentials.has(id)).toBe(false);
    expect(broker.removed.length).toBe(removedBefore);
  });
});

describe('other changes against their deadline', () => {
  it('rename, move and automation commit only before the deadline', async () => {
    const id = randomDeviceId();
    await outcome(handlers['registry.device.provision'](provisionRequest(id), ctx(Date.now() + 2_000)));
    const req = (body: Record<string, unknown>): RequestEnvelope => ({ ...provisionRequest(id), body });
    await expect(handlers['registry.device.rename'](req({ name: 'late' }), ctx(Date.now() - 1))).rejects.toBeInstanceOf(CommitDeadlineError);
    await expect(handlers['registry.device.automation'](req({ enabled: false }), ctx(Date.now() - 1))).rejects.toBeInstanceOf(CommitDeadlineError);
    await expect(handlers['registry.device.move'](req({ org_node_id: null }), ctx(Date.now() - 1))).rejects.toBeInstanceOf(CommitDeadlineError);
    expect(await testDb.db.device.findUniqueOrThrow({ where: { deviceId: id } })).toMatchObject({ name: null, automationEnabled: true });
    expect(await eventsOf(id)).toBe(1);
    expect(await handlers['registry.device.rename'](req({ name: 'on time' }), ctx(Date.now() + 2_000))).toEqual({ status: 204 });
    expect(await eventsOf(id)).toBe(2);
  });
});

describe('over the bus', () => {
  let nats: PrivateNats;
  let caller: Bus;

  beforeAll(async () => {
    nats = await startPrivateNats();
    caller = await connectBus(nats.url, 'caller');
  });
  afterAll(async () => {
    await caller?.drain();
    await nats?.stop();
  });

  it('answers a commit that missed its deadline as 503, nothing stored', async () => {
    const bus = await connectBus(nats.url);
    try {
      const slow = new SlowBroker();
      serveRegistry(bus, { db: testDb.db, broker: slow, kek: randomBytes(32), logger });
      await bus.connection.flush();
      const id = randomDeviceId();
      slow.upsertDelays = [600];
      const reply = await caller.request('registry.device.provision', provisionRequest(id), { timeoutMs: 300, outcomeGraceMs: 1_000 });
      expect(reply).toMatchObject({ ok: false, error: { status: 503, message: expect.stringMatching(/nothing was stored/) } });
      expect(await stored(id)).toBe(false);
      expect(slow.credentials.has(id)).toBe(false);
    } finally {
      await bus.drain();
    }
  });

  it('answers 503, not 500, when its database cannot be reached', async () => {
    const brokenDb = openRegistryDb('postgresql://postgres@127.0.0.1:1/fleet_nowhere', 1);
    const bus = await connectBus(nats.url);
    try {
      serveRegistry(bus, { db: brokenDb, broker: new SlowBroker(), kek: randomBytes(32), logger });
      await bus.connection.flush();
      const down = await caller.request('registry.device.list', { request_id: uniqueId('req'), principal: admin, params: {}, query: {} });
      expect(down).toMatchObject({ ok: false, error: { status: 503, code: 'service_unavailable' } });
    } finally {
      await bus.drain();
      await brokenDb.$disconnect();
    }
  });
});

describe('provisioning where the broker asks the hook (one statement, no broker step)', () => {
  let hookHandlers: ReturnType<typeof registryHandlers>;
  beforeAll(() => {
    hookHandlers = registryHandlers({ db: testDb.db, broker, kek: randomBytes(32), logger, brokerKeepsCredentials: false });
  });

  it('stores the record with its hash and its event, and never calls the broker', async () => {
    const id = randomDeviceId();
    const before = broker.credentials.size;
    const answer = await hookHandlers['registry.device.provision'](provisionRequest(id), ctx(Date.now() + 2_000));
    expect(answer).toMatchObject({ status: 201 });
    const row = await testDb.db.device.findUniqueOrThrow({ where: { deviceId: id } });
    expect(row.brokerPasswordHash).toMatch(/^scrypt\$/);
    expect(await eventsOf(id)).toBe(1);
    expect(broker.credentials.size).toBe(before);
  });

  it('answers 409 for an id in use and writes nothing', async () => {
    const id = randomDeviceId();
    await hookHandlers['registry.device.provision'](provisionRequest(id), ctx(Date.now() + 2_000));
    expect(await outcome(hookHandlers['registry.device.provision'](provisionRequest(id), ctx(Date.now() + 2_000)))).toMatchObject({ status: 409, code: 'conflict' });
    expect(await eventsOf(id)).toBe(1);
  });

  it('stores nothing when the statement would commit after the deadline', async () => {
    const id = randomDeviceId();
    // A lock the statement waits on (lockDeviceId's key) holds it past its deadline.
    const holder = openRegistryDb(testDb.url);
    try {
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const lockTaken = new Promise<void>((r) => (locked = r));
      const holding = holder.$transaction(async (tx) => {
        await tx.$executeRawUnsafe('SELECT pg_advisory_xact_lock(hashtext($1))', `device:${id}`);
        locked();
        await released;
      });
      await lockTaken;
      // The bus answers a missed deadline 503 (isDeadlineExceeded), as for every handler.
      const late = hookHandlers['registry.device.provision'](provisionRequest(id), ctx(Date.now() + 300)).catch((err: unknown) => err);
      await sleep(600);
      release();
      await holding;
      expect(isDeadlineExceeded(await late)).toBe(true);
      expect(await stored(id)).toBe(false);
      expect(await eventsOf(id)).toBe(0);
    } finally {
      await holder.$disconnect();
    }
  });
});
