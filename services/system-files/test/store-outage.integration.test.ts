/**
 * A database stopped while system-files runs: every subject that needs it answers 503
 * service_unavailable with a retry hint (never 500, never a hang), what needs no database keeps
 * working, and the devices' sys/* traffic that arrives meanwhile stays in DEVICE_IN until it can
 * be stored: once the database is back it is in the response feed, the settings cache and the
 * transfers it settles. The service runs as main.ts composes it (serveSystem and the durable
 * sys/* consumer) with its database behind a proxy the test cuts, on the machine's NATS under a
 * subject prefix and a DEVICE_IN stream of this file's own, with stand-ins for the bridge and the
 * registry.
 */
import { headers as natsHeaders, type JetStreamClient, type JsMsg } from 'nats';
import type { ReplyEnvelope, RequestEnvelope } from '@fleet/contracts';
import type { Bus } from '@fleet/service-kit';
import { answersNotUnavailable, BridgeStandIn, cuttableDatabase, principal, randomDeviceId, uniqueId, waitFor, type CuttableDatabase } from '@fleet/test-kit';
import { sysTrafficProcessor } from '../src/handlers/device-in';
import { SYSTEM_SUBJECTS, serveSystem, type SystemSubject } from '../src/handlers/serve';
import type { FileStorage } from '../src/storage/storage';
import { openSystemDb, type SystemDb } from '../src/store/prisma';
import { captured, createTestDb, envelope, logger, startTestbed, type TestDb, type Testbed } from './support';

let testDb: TestDb;
let bed: Testbed;
let proxy: CuttableDatabase;
let db: SystemDb;
let bus: Bus;
let js: JetStreamClient;
let stream: Testbed['stream'];
let bridge: BridgeStandIn;
const DURABLE = 'sys';
const SHA = 'ab'.repeat(32);
const partner = principal();

/** Storage is never reached while the database is out: a delete stops at its transaction. */
const storage: FileStorage = {
  kind: 'local',
  putNew: async () => true,
  open: async () => {
    throw new Error('not used here');
  },
  remove: async () => undefined,
  directUrl: async () => undefined,
};

beforeAll(async () => {
  testDb = await createTestDb();
  proxy = await cuttableDatabase(testDb.url);
  db = openSystemDb(proxy.url, 2);
  bed = await startTestbed({ db, storage, urls: { downloadUrl: async (f) => `https://files.test/d/${f.dir}.${f.name}`, uploadUrl: () => 'http://127.0.0.1:1/u' }, timeoutMs: 1000 });
  ({ bus, js, stream, bridge } = bed);
  serveSystem(bus, bed.deps);
  bed.startIntake(db, DURABLE);
  await testDb.db.platformFile.create({ data: { dir: 'files', name: 'chime.mp3', size: 1000n, sha256: SHA, storageKey: 'files/chime.mp3' } });
});

afterAll(async () => {
  await bed?.close();
  await db?.$disconnect();
  await proxy?.close();
  await testDb?.drop();
});

afterEach(() => proxy.restore());

const ask = (subject: SystemSubject, request: RequestEnvelope): Promise<ReplyEnvelope> => bus.request(subject, request, { timeoutMs: 5000 });
const asPartner = (deviceId: string, parts: Partial<RequestEnvelope> = {}): RequestEnvelope => envelope(deviceId, { principal: partner, ...parts });

async function feedLines(deviceId: string): Promise<string[]> {
  const reply = await ask('system.response.list', asPartner(deviceId, { query: { since: new Date(Date.now() - 3_600_000).toISOString() } }));
  if (!reply.ok) throw new Error(`system.response.list: ${reply.error.status} ${reply.error.code}`);
  return (reply.body as { rows: Array<{ line: string }> }).rows.map((r) => r.line);
}

async function intakeState(): Promise<{ pending: number; redelivered: number }> {
  const info = await (await bus.connection.jetstreamManager()).consumers.info(stream.name, DURABLE);
  return { pending: info.num_pending + info.num_ack_pending, redelivered: info.num_redelivered };
}

describe('while the database is stopped', () => {
  it('answers 503 service_unavailable with a retry hint on every subject that needs it, quickly, and serves the rest', async () => {
    const deviceId = randomDeviceId();
    expect(await ask('system.file.list', asPartner(deviceId))).toMatchObject({ ok: true, status: 200 });

    proxy.cut();
    const needDatabase: Record<Exclude<SystemSubject, 'system.command.registry' | 'system.upload.open' | 'system.status.get' | 'system.mqtt.publish' | 'system.mqtt.read'>, RequestEnvelope> = {
      'system.settings.get': asPartner(deviceId),
      // A secret setting reads the device's reported settings (enc: false) before sealing.
      'system.settings.put': asPartner(deviceId, { params: { key: 'wifiPass' }, body: { value: 'secret-pass' } }),
      'system.response.list': asPartner(deviceId),
      'system.file.list': asPartner(deviceId),
      'system.file.delete': asPartner(deviceId, { query: { dir: 'files', name: 'chime.mp3' } }),
      'system.transfer.create': asPartner(deviceId, { body: { name: 'chime.mp3' } }),
      'system.transfer.get': asPartner(deviceId, { params: { transfer_id: `xf_${'0'.repeat(20)}` } }),
      'system.transfer.list': asPartner(deviceId),
      // addfile carries the stored file's SHA-256.
      'system.command.send': asPartner(deviceId, { body: { command: 'addfile', params: { name: 'chime.mp3' } } }),
    };
    const subjects = Object.keys(needDatabase) as Array<keyof typeof needDatabase>;
    const requests = subjects.map((subject) => ({ subject, envelope: needDatabase[subject] }));
    expect(await answersNotUnavailable(bus, requests, 5000)).toEqual([]);
    // The gateway turns retry_after into Retry-After: partners are told when to come back.
    for (const { subject, envelope: request } of requests) {
      const reply = await ask(subject, { ...request, request_id: uniqueId('r') });
      expect({ subject, reply }).toEqual({ subject, reply: { ok: false, error: expect.objectContaining({ status: 503, code: 'service_unavailable', retry_after: expect.any(Number) }) } });
    }

    // What needs no database is unaffected: the verb registry, the upload ticket, a plain verb.
    const rest = SYSTEM_SUBJECTS.filter((s) => !(s in needDatabase));
    expect(rest.sort()).toEqual(['system.command.registry', 'system.mqtt.publish', 'system.mqtt.read', 'system.status.get', 'system.upload.open']);
    expect(await ask('system.command.registry', asPartner(deviceId))).toMatchObject({ ok: true, status: 200 });
    expect(await ask('system.upload.open', asPartner(deviceId))).toMatchObject({ ok: true, status: 200 });
    expect(await ask('system.command.send', asPartner(deviceId, { body: { command: 'query' } }))).toMatchObject({ ok: true, status: 202, body: { payload: 'query>' } });

    proxy.restore();
    await waitFor(async () => (await ask('system.file.list', asPartner(deviceId))).ok, { timeoutMs: 10_000, what: 'system-files answering again' });
    expect(await testDb.db.platformFile.count({ where: { name: 'chime.mp3' } })).toBe(1);
  }, 40_000);

  it('keeps the sys/* traffic that arrives meanwhile and stores it once the database is back', async () => {
    const deviceId = randomDeviceId();
    bridge.reset();
    const pushed = await ask('system.transfer.create', asPartner(deviceId, { body: { name: 'chime.mp3' } }));
    if (!pushed.ok) throw new Error(`system.transfer.create: ${pushed.error.status} ${pushed.error.code}`);
    expect(pushed).toMatchObject({ status: 202, body: { state: 'sent' } });
    const transferId = String((pushed.body as { transfer_id: string }).transfer_id);
    const addfile = bridge.published[0]?.payload as string;
    const before = await intakeState();

    proxy.cut();
    const lines = ['query>ok', 'log>rebooting', `${addfile}>ok`, 'set>volume=5>ok'];
    for (const line of lines) await captured(js, stream.prefix, { deviceId, levels: 'sys/resp', payload: line });
    await captured(js, stream.prefix, { deviceId, levels: 'sys/settings', payload: { fw_ver: '2.4', file_list: [{ name: 'chime.mp3', size: 1000 }], volume: 5 } });
    // The intake met the outage: it took the messages, failed to store them and got them back.
    await waitFor(async () => (await intakeState()).redelivered > before.redelivered, { timeoutMs: 15_000, what: 'the intake failing on the stopped database' });
    expect((await ask('system.response.list', asPartner(deviceId))).ok).toBe(false);

    proxy.restore();
    const feed = await waitFor(async () => {
      const seen = await feedLines(deviceId);
      return seen.length >= lines.length ? seen : undefined;
    }, { timeoutMs: 20_000, what: 'the lines sent during the outage in the feed' });
    // Every line, once; redeliveries after the outage settle in their own order, so arrival order is not asserted.
    expect([...feed].sort()).toEqual([...lines].sort());
    const transfer = await ask('system.transfer.get', asPartner(deviceId, { params: { transfer_id: transferId } }));
    expect(transfer).toMatchObject({ ok: true, body: { state: 'succeeded', terminal: true } });
    const settings = await waitFor(async () => {
      const reply = await ask('system.settings.get', asPartner(deviceId));
      return reply.ok ? reply : undefined;
    }, { timeoutMs: 10_000, what: 'the settings reported during the outage' });
    expect(settings).toMatchObject({ status: 200, body: { fw_ver: '2.4', settings: { volume: 5 } } });
    await waitFor(async () => (await intakeState()).pending === 0, { timeoutMs: 10_000, what: 'the intake settling everything' });
    expect((await feedLines(deviceId)).sort()).toEqual([...lines].sort());
  }, 40_000);
});

/**
 * The intake's poison guard (a message that keeps failing on its own is dropped after some
 * deliveries, or terminated when others of its batch succeed) must not take an outage for
 * poison: a database away for longer than those deliveries take, or one lost while a failed
 * batch is retried message by message, would otherwise lose lines. These drive the consumer's
 * processor directly, as the pull consumer does: what it rejects is redelivered, what it returns
 * is terminated.
 */
describe('the sys/* intake never drops a line for an outage', () => {
  function delivery(deviceId: string, line: string, seq: number, deliveries: number, receivedAt = new Date().toISOString()): JsMsg {
    const h = natsHeaders();
    h.set('Received-At', receivedAt);
    h.set('Nats-Msg-Id', uniqueId('msg'));
    const subject = `${stream.prefix}dev.in.light.${deviceId}.sys.resp`;
    return { subject, data: Buffer.from(line), headers: h, seq, info: { redeliveryCount: deliveries } } as unknown as JsMsg;
  }

  it('keeps a lone message for redelivery however many times an outage made it fail', async () => {
    const deviceId = randomDeviceId();
    const process = sysTrafficProcessor(db, stream.prefix, logger);
    const msg = delivery(deviceId, 'reboot>ok', 1, 25);

    proxy.cut();
    await expect(process([msg])).rejects.toThrow();

    proxy.restore();
    const kept = await waitFor(async () => process([msg]).catch(() => undefined), { timeoutMs: 10_000, what: 'the message stored once the database is back' });
    expect([...kept]).toEqual([]);
    expect(await feedLines(deviceId)).toEqual(['reboot>ok']);
  });

  it('has the whole batch redelivered when the database is lost while a failed batch is retried message by message', async () => {
    const deviceId = randomDeviceId();
    // A receive time Postgres cannot hold: this message fails on its own, every time.
    const poison = delivery(deviceId, 'query>ok', 1, 1, new Date(8.64e15).toISOString());
    const batch = [poison, delivery(deviceId, 'log>first', 2, 1), delivery(deviceId, 'log>second', 3, 1)];
    // The batch fails on the poison, so its messages are tried one by one: the poison fails
    // again, the first line is stored, and the database is gone before the second.
    const weather: Array<() => void> = [() => undefined, () => undefined, () => undefined, () => proxy.cut()];
    const flapping = new Proxy(db, {
      get(target, name, receiver) {
        if (name !== '$transaction') return Reflect.get(target, name, receiver) as unknown;
        return (...args: unknown[]) => {
          weather.shift()?.();
          return (target.$transaction as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const process = sysTrafficProcessor(flapping, stream.prefix, logger);

    await expect(process(batch)).rejects.toThrow();
    expect(weather).toEqual([]);

    proxy.restore();
    const kept = await waitFor(async () => process(batch).catch(() => undefined), { timeoutMs: 10_000, what: 'the batch handled once the database is back' });
    expect([...kept]).toEqual([poison]);
    // The line stored by the interrupted retry is kept once.
    expect(await feedLines(deviceId)).toEqual(['log>first', 'log>second']);
  });
});
