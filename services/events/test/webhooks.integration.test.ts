/**
 * The events service against real NATS (JetStream) and Postgres, with a real HTTP receiver:
 * endpoints, fan-out by type, permission and scope, signed deliveries, retries, per-device
 * order, the delivery log, redelivery, test events and secret rotation. The gateway's
 * `gateway.partner.access` and the registry are stood in for.
 */
import http from 'node:http';
import { Webhook } from 'standardwebhooks';
import { newPartnerEvent, partnerEventSubject, type PartnerEventType, type Permission, type Principal, type ReplyEnvelope } from '@fleet/contracts';
import { RegistryClient } from '@fleet/registry-client';
import { Bus, ensureStream, eventStreamPlan, PARTNER_EVENTS_STREAM, publishDurable, type DurablePullConsumer } from '@fleet/service-kit';
import { randomDeviceId, RegistryStandIn, uniqueId, waitFor, WebhookReceiver } from '@fleet/test-kit';
import { DevicePlaces } from '../src/access/device-places';
import { newDeliveryId } from '../src/domain/ids';
import { PartnerAccessDirectory } from '../src/access/partner-access';
import { DeliveryWorker, WITHDRAWN } from '../src/handlers/delivery-worker';
import { fanOutBatch, fanoutConsumer } from '../src/handlers/fanout';
import { serveEvents } from '../src/handlers/webhooks';
import { insertDeliveries } from '../src/store/deliveries';
import { ReceiverClient } from '../src/http/receiver-client';
import { StreamServer } from '../src/http/stream-server';
import { connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb, serveGatewayAccess, type PartnerAccessTable } from './support';

const KEY = Buffer.alloc(32, 3);

/** The events a receiver got, parsed, in arrival order. */
const eventsOf = (receiver: WebhookReceiver) => receiver.received.map((d) => d.event);

let nats: PrivateNats;
let testDb: TestDb;
let bus: Bus;
let registry: RegistryStandIn;
let fanout: DurablePullConsumer;
let worker: DeliveryWorker;
let streams: StreamServer;
let client: ReceiverClient;
const fanoutDurable = uniqueId('fanout');
/** What gateway.partner.access answers, by partner id. */
const partners: PartnerAccessTable = new Map();

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  bus = await connectBus(nats.url);
  registry = new RegistryStandIn(bus.connection);
  serveGatewayAccess(bus.connection, partners);
  await ensureStream(await bus.connection.jetstreamManager(), eventStreamPlan(PARTNER_EVENTS_STREAM), logger);
  const timeouts = { cacheMs: 0, timeoutMs: 2000 };
  const access = new PartnerAccessDirectory(bus, timeouts);
  const registryClient = new RegistryClient(bus, { timeoutMs: 2000, logger });
  const places = new DevicePlaces(registryClient, testDb.db, timeouts);
  client = new ReceiverClient({ policy: { local: true }, timeoutMs: 2000, maxSocketsPerHost: 8 });
  worker = new DeliveryWorker({
    db: testDb.db,
    mayStillReceive: (partnerId, type) => access.mayStillReceive(partnerId, type),
    client, secretsKey: KEY, schedule: [100, 100, 100, 100], timeoutMs: 2000, concurrency: 16, perEndpoint: 4, logger, pollMs: 100 });
  streams = new StreamServer({ nc: bus.connection, db: testDb.db, access, places, stream: PARTNER_EVENTS_STREAM, maxPerPartner: 2, keepAliveMs: 60_000, logger });
  await streams.listen(0, '127.0.0.1');
  serveEvents(bus, { db: testDb.db, secretsKey: KEY, policy: { local: true }, webhooksPerPartner: 3, queued: () => worker.nudge(), tickets: streams, registry: registryClient });
  fanout = fanoutConsumer(bus.connection, { db: testDb.db, access, places, logger, stored: () => worker.nudge() }, { stream: PARTNER_EVENTS_STREAM, durable: fanoutDurable });
  fanout.start();
  worker.start();
});

afterAll(async () => {
  await fanout?.stop();
  await worker?.stop();
  await streams?.close();
  client?.close();
  registry?.close();
  await bus?.drain();
  await testDb?.drop();
  await nats?.stop();
});

/** A partner the stand-in gateway knows, with a principal for its requests. */
function partner(permissions: Permission[], orgGrants: number[] = []): Principal {
  const p = principal({ permissions: [...permissions, 'webhook_manage', 'events_read'], org_grants: orgGrants });
  partners.set(p.partner_id, { permissions: p.permissions, org_grants: orgGrants });
  return p;
}

/** A device the stand-in registry places at `node` (whose path is `path`). */
function device(path: number[]): string {
  const id = randomDeviceId();
  const node = path[path.length - 1] as number;
  registry.described.set(id, { device_id: id, product: 'light', name: null, org_node: { id: node, parent_id: path[path.length - 2] ?? null, name: `n${node}` }, automation_enabled: true });
  registry.orgPaths.set(node, path);
  return id;
}

async function call(subject: Parameters<Bus['request']>[0], p: Principal, parts: { params?: Record<string, string>; body?: unknown; query?: Record<string, string> } = {}): Promise<ReplyEnvelope> {
  return bus.request(subject, { request_id: uniqueId('req'), principal: p, params: parts.params ?? {}, query: parts.query ?? {}, ...(parts.body !== undefined ? { body: parts.body } : {}) } as never);
}

async function createHook(p: Principal, url: string, eventTypes: string[]): Promise<{ id: string; secret: string }> {
  const reply = await call('events.webhook.create', p, { body: { url, event_types: eventTypes } });
  if (!reply.ok) throw new Error(JSON.stringify(reply.error));
  return reply.body as { id: string; secret: string };
}

async function publish(type: PartnerEventType, deviceId: string, data: Record<string, unknown>, orgNodeIds?: number[]): Promise<string> {
  const message = newPartnerEvent(type, { deviceId, data, ...(orgNodeIds ? { orgNodeIds } : {}) });
  await publishDurable(bus.connection, partnerEventSubject(type), message);
  return message.event.id;
}

const connected = () => ({ status: 'connected', status_changed_at: new Date().toISOString() });

describe('endpoints', () => {
  it('creates one with its secret shown once, lists, reads, changes and deletes it', async () => {
    const p = partner([]);
    const created = await call('events.webhook.create', p, { body: { url: 'http://127.0.0.1:1/x', event_types: ['device.connected', 'device.connected'], description: 'ops' } });
    expect(created).toMatchObject({ ok: true, status: 201 });
    const body = (created as unknown as { body: Record<string, unknown> }).body;
    expect(body).toMatchObject({ url: 'http://127.0.0.1:1/x', event_types: ['device.connected'], description: 'ops', enabled: true });
    expect(body.secret).toMatch(/^whsec_/);
    expect((created as unknown as { headers?: Record<string, string> }).headers?.Location).toBe(`/v1/webhooks/${body.id}`);
    const read = await call('events.webhook.get', p, { params: { webhook_id: body.id as string } });
    expect(read).toMatchObject({ ok: true, body: { id: body.id } });
    expect(JSON.stringify(read)).not.toContain('whsec_');
    const changed = await call('events.webhook.update', p, { params: { webhook_id: body.id as string }, body: { enabled: false, description: null } });
    expect(changed).toMatchObject({ ok: true, body: { enabled: false, description: null } });
    const listed = await call('events.webhook.list', p);
    expect((listed as unknown as { body: { webhooks: unknown[] } }).body.webhooks).toHaveLength(1);
    // Another partner sees none of it.
    const other = partner([]);
    expect(await call('events.webhook.get', other, { params: { webhook_id: body.id as string } })).toMatchObject({ ok: false, error: { status: 404, code: 'not_found' } });
    expect(await call('events.webhook.delete', p, { params: { webhook_id: body.id as string } })).toMatchObject({ ok: true, status: 204 });
    expect(await call('events.webhook.get', p, { params: { webhook_id: body.id as string } })).toMatchObject({ ok: false, error: { status: 404 } });
  });

  it('refuses unknown types, bad urls and more than the limit', async () => {
    const p = partner([]);
    expect(await call('events.webhook.create', p, { body: { url: 'http://127.0.0.1:1/x', event_types: ['device.exploded'] } })).toMatchObject({ ok: false, error: { status: 400, code: 'validation_error' } });
    expect(await call('events.webhook.create', p, { body: { url: 'ftp://127.0.0.1/x', event_types: ['device.removed'] } })).toMatchObject({ ok: false, error: { status: 400 } });
    for (let i = 0; i < 3; i += 1) await createHook(p, `http://127.0.0.1:1/${i}`, ['device.removed']);
    expect(await call('events.webhook.create', p, { body: { url: 'http://127.0.0.1:1/4', event_types: ['device.removed'] } })).toMatchObject({ ok: false, error: { status: 403, code: 'limit_reached' } });
  });
});

describe('deliveries', () => {
  let receiver: WebhookReceiver;
  beforeEach(async () => {
    receiver = await new WebhookReceiver().start();
  });
  afterEach(() => receiver.close());

  it('delivers an event once, signed, to partners whose scope and permissions allow it', async () => {
    const allowed = partner(['health_read'], [4]);
    const noPermission = partner([], [4]);
    const outOfScope = partner(['health_read'], [5]);
    const hook = await createHook(allowed, receiver.url, ['device.connected']);
    const other = await new WebhookReceiver().start();
    await createHook(noPermission, other.url, ['device.connected']);
    await createHook(outOfScope, other.url, ['device.connected']);
    const id = device([1, 4, 9]);
    const eventId = await publish('device.connected', id, connected());
    await waitFor(() => receiver.received.length === 1, { what: 'the delivery' });
    const [got] = receiver.received;
    const event = new Webhook(hook.secret).verify(got!.body, got!.headers as Record<string, string>) as Record<string, unknown>;
    expect(event).toMatchObject({ id: eventId, type: 'device.connected', version: 1, device_id: id, data: { status: 'connected' } });
    expect(got!.headers['webhook-id']).toBe(eventId);
    // The envelope's fields come in their documented order (jsonb storage does not keep it).
    expect(Object.keys(JSON.parse(got!.body))).toEqual(['id', 'type', 'version', 'occurred_at', 'device_id', 'data']);
    // A later event to the same endpoint arrives: nothing else came meanwhile.
    await publish('device.connected', id, connected());
    await waitFor(() => receiver.received.length === 2, { what: 'the second delivery' });
    expect(other.received).toHaveLength(0);
    await other.close();
  });

  it('retries a failing receiver and delivers on the fourth attempt; dead after the last', async () => {
    const p = partner(['health_read'], [1]);
    const hook = await createHook(p, receiver.url, ['device.connected']);
    receiver.failures = 3;
    const eventId = await publish('device.connected', device([1]), connected());
    await waitFor(() => receiver.received.length === 4, { what: 'four attempts' });
    const log = await waitFor(async () => {
      const reply = (await call('events.delivery.list', p, { params: { webhook_id: hook.id } })) as unknown as { body: { deliveries: Array<Record<string, unknown>> } };
      const [d] = reply.body.deliveries;
      return d?.state === 'succeeded' ? d : undefined;
    });
    expect(log).toMatchObject({ event_id: eventId, attempts: 4, state: 'succeeded', last_attempt: { status: 204, error: null } });
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id']))).toEqual(new Set([eventId]));

    receiver.failures = 100;
    await publish('device.connected', device([1]), connected());
    const dead = await waitFor(async () => {
      const reply = (await call('events.delivery.list', p, { params: { webhook_id: hook.id }, query: { state: 'dead' } })) as unknown as { body: { deliveries: Array<Record<string, unknown>> } };
      return reply.body.deliveries[0];
    }, { timeoutMs: 10_000 });
    expect(dead).toMatchObject({ attempts: 5, state: 'dead', next_attempt_at: null, last_attempt: { status: 503, error: 'the receiver answered 503' } });
    // Redelivered by hand, it goes out again once the receiver is back.
    receiver.failures = 0;
    const before = receiver.received.length;
    expect(await call('events.delivery.redeliver', p, { params: { webhook_id: hook.id, delivery_id: dead.id as string } })).toMatchObject({ ok: true, status: 202, body: { state: 'pending', attempts: 0 } });
    await waitFor(() => receiver.received.length === before + 1, { what: 'the redelivery' });
  }, 30_000);

  it('keeps one device’s events in order across retries, without holding back other devices', async () => {
    const p = partner(['health_read'], [1]);
    await createHook(p, receiver.url, ['device.connected', 'device.disconnected']);
    const slow = device([1]);
    const quick = device([1]);
    const first = newPartnerEvent('device.connected', { deviceId: slow, data: connected() });
    receiver.failuresFor.set(first.event.id, 2);
    await publishDurable(bus.connection, partnerEventSubject('device.connected'), first);
    const second = await publish('device.disconnected', slow, { status: 'disconnected', status_changed_at: new Date().toISOString() });
    const third = await publish('device.connected', slow, connected());
    const others = await publish('device.connected', quick, connected());
    await waitFor(() => new Set(eventsOf(receiver).map((e) => e.id)).size === 4, { what: 'every event', timeoutMs: 10_000 });
    const order = [first.event.id, second, third];
    const slowAttempts = eventsOf(receiver).filter((e) => e.device_id === slow).map((e) => order.indexOf(e.id));
    // Every attempt of a later event of the device came after the earlier ones were through.
    expect([...slowAttempts].sort()).toEqual(slowAttempts);
    expect(slowAttempts).toEqual([0, 0, 0, 1, 2]);
    expect(eventsOf(receiver).map((e) => e.id)).toContain(others);
  }, 20_000);

  it('stops the pending deliveries of a partner disabled, or whose permission was withdrawn, after the fan-out', async () => {
    for (const change of ['disabled', 'permission withdrawn'] as const) {
      const p = partner(['health_read'], [1]);
      const hook = await createHook(p, receiver.url, ['device.connected']);
      receiver.failures = 1_000;
      const before = receiver.received.length;
      const eventId = await publish('device.connected', device([1]), connected());
      await waitFor(() => receiver.received.length > before, { what: 'the first attempt' });
      if (change === 'disabled') partners.delete(p.partner_id);
      else partners.set(p.partner_id, { permissions: ['webhook_manage'], org_grants: [1] });
      const settled = await waitFor(async () => {
        const reply = (await call('events.delivery.list', p, { params: { webhook_id: hook.id } })) as unknown as { ok: boolean; body: { deliveries: Array<Record<string, unknown>> } };
        const [d] = reply.ok ? reply.body.deliveries : [];
        return d?.state === 'dead' ? d : undefined;
      }, { timeoutMs: 5_000, what: `the delivery withdrawn (${change})` });
      expect(settled).toMatchObject({ event_id: eventId, state: 'dead', last_attempt: { status: null, error: WITHDRAWN } });
      const attempts = receiver.received.filter((d) => d.event.id === eventId).length;
      // Redelivering by hand does not send it either.
      await call('events.delivery.redeliver', p, { params: { webhook_id: hook.id, delivery_id: settled.id as string } });
      await waitFor(async () => {
        const reply = (await call('events.delivery.list', p, { params: { webhook_id: hook.id } })) as unknown as { body: { deliveries: Array<Record<string, unknown>> } };
        return reply.body.deliveries[0]?.state === 'dead';
      }, { what: 'the redelivery withdrawn too' });
      expect(receiver.received.filter((d) => d.event.id === eventId)).toHaveLength(attempts);
      receiver.failures = 0;
    }
  });

  it('sends a test event whatever the endpoint subscribes to', async () => {
    const p = partner([]);
    const hook = await createHook(p, receiver.url, ['meter.records_stored']);
    const reply = await call('events.webhook.test', p, { params: { webhook_id: hook.id } });
    expect(reply).toMatchObject({ ok: true, status: 202, body: { event_type: 'webhook.test', state: 'pending' } });
    await waitFor(() => receiver.received.length === 1);
    expect(eventsOf(receiver)[0]).toMatchObject({ type: 'webhook.test', version: 1, data: { webhook_id: hook.id } });
  });

  it('signs with both secrets during a rotation', async () => {
    const p = partner([]);
    const hook = await createHook(p, receiver.url, ['device.removed']);
    const rotated = (await call('events.webhook.rotate', p, { params: { webhook_id: hook.id }, body: { previous_expires_in_s: 60 } })) as unknown as { ok: true; body: { secret: string; previous_secret_expires_at: string } };
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(hook.secret);
    await call('events.webhook.test', p, { params: { webhook_id: hook.id } });
    await waitFor(() => receiver.received.length === 1);
    const [got] = receiver.received;
    for (const secret of [hook.secret, rotated.body.secret]) expect(() => new Webhook(secret).verify(got!.body, got!.headers as Record<string, string>)).not.toThrow();
    // With no overlap, only the new secret signs.
    expect(await call('events.webhook.rotate', p, { params: { webhook_id: hook.id }, body: { previous_expires_in_s: 0 } })).toMatchObject({ ok: true, body: { previous_secret_expires_at: null } });
    await call('events.webhook.test', p, { params: { webhook_id: hook.id } });
    await waitFor(() => receiver.received.length === 2);
    expect(String(receiver.received[1]!.headers['webhook-signature']).split(' ')).toHaveLength(1);
  });

  it('keeps every secret it answered signing until its expiry when rotations follow each other (a retry after a lost answer, two at once)', async () => {
    const p = partner([]);
    const hook = await createHook(p, receiver.url, ['device.removed']);
    const rotate = async (overlap: number) =>
      ((await call('events.webhook.rotate', p, { params: { webhook_id: hook.id }, body: { previous_expires_in_s: overlap } })) as unknown as { ok: true; body: { secret: string } }).body.secret;
    const first = await rotate(60);
    // The first answer was lost; the retry (and one made at the same moment) rotates again.
    const [second, third] = await Promise.all([rotate(60), rotate(60)]);
    await call('events.webhook.test', p, { params: { webhook_id: hook.id } });
    await waitFor(() => receiver.received.length === 1);
    const [got] = receiver.received;
    // The secret before the retry, the one the lost answer held and whichever of the two came last all verify.
    for (const secret of [first, second, third]) expect(() => new Webhook(secret).verify(got!.body, got!.headers as Record<string, string>)).not.toThrow();
    // The secret the endpoint was created with stopped once three newer ones signed: three sign at most.
    expect(String(got!.headers['webhook-signature']).split(' ')).toHaveLength(3);
    // No overlap: every earlier secret stops at once.
    const alone = await rotate(0);
    await call('events.webhook.test', p, { params: { webhook_id: hook.id } });
    await waitFor(() => receiver.received.length === 2);
    expect(String(receiver.received[1]!.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(() => new Webhook(alone).verify(receiver.received[1]!.body, receiver.received[1]!.headers as Record<string, string>)).not.toThrow();
  });

  it('pages the delivery log newest first', async () => {
    const p = partner([]);
    const hook = await createHook(p, receiver.url, ['device.removed']);
    for (let i = 0; i < 3; i += 1) await call('events.webhook.test', p, { params: { webhook_id: hook.id } });
    const first = (await call('events.delivery.list', p, { params: { webhook_id: hook.id }, query: { limit: '2' } })) as unknown as { body: { deliveries: Array<{ id: string }>; next_cursor: string; has_more: boolean } };
    expect(first.body.deliveries).toHaveLength(2);
    expect(first.body.has_more).toBe(true);
    const second = (await call('events.delivery.list', p, { params: { webhook_id: hook.id }, query: { limit: '2', cursor: first.body.next_cursor } })) as unknown as { body: { deliveries: Array<{ id: string }>; next_cursor: string | null; has_more: boolean } };
    expect(second.body.deliveries).toHaveLength(1);
    expect([second.body.next_cursor, second.body.has_more]).toEqual([null, false]);
    expect(await call('events.delivery.list', p, { params: { webhook_id: hook.id }, query: { cursor: 'nope' } })).toMatchObject({ ok: false, error: { status: 400 } });
  });
});

describe('the delivery log and the endpoint’s state', () => {
  let receiver: WebhookReceiver;
  beforeEach(async () => {
    receiver = await new WebhookReceiver().start();
  });
  afterEach(() => receiver.close());

  type Listed = { ok: boolean; body: { deliveries: Array<Record<string, unknown>>; next_cursor: string | null } };

  it('answers previous_secret_expires_at null when a rotation retires the old secret at once', async () => {
    const p = partner([]);
    const hook = await createHook(p, receiver.url, ['device.removed']);
    const rotated = await call('events.webhook.rotate', p, { params: { webhook_id: hook.id }, body: { previous_expires_in_s: 0 } });
    expect(rotated).toMatchObject({ ok: true, status: 200, body: { id: hook.id, previous_secret_expires_at: null } });
    // With an overlap it is the moment the old secret stops signing.
    const overlapping = (await call('events.webhook.rotate', p, { params: { webhook_id: hook.id }, body: { previous_expires_in_s: 60 } })) as unknown as { body: { previous_secret_expires_at: string } };
    expect(Date.parse(overlapping.body.previous_secret_expires_at)).toBeGreaterThan(Date.now() + 50_000);
  });

  it('refuses a deliveries cursor of another endpoint (400), even of the same partner', async () => {
    const p = partner([]);
    const a = await createHook(p, receiver.url, ['device.removed']);
    const b = await createHook(p, receiver.url, ['device.removed']);
    for (const hook of [a, b, a, b, a, b]) await call('events.webhook.test', p, { params: { webhook_id: hook.id } });
    const pageOfA = (await call('events.delivery.list', p, { params: { webhook_id: a.id }, query: { limit: '2' } })) as unknown as Listed;
    expect(pageOfA.body.next_cursor).toEqual(expect.any(String));
    expect(await call('events.delivery.list', p, { params: { webhook_id: b.id }, query: { cursor: pageOfA.body.next_cursor as string } })).toMatchObject({
      ok: false,
      error: { status: 400, code: 'validation_error' },
    });
    // On its own endpoint it goes on where the page ended.
    const rest = (await call('events.delivery.list', p, { params: { webhook_id: a.id }, query: { cursor: pageOfA.body.next_cursor as string } })) as unknown as Listed;
    expect(rest.body.deliveries.map((d) => d.webhook_id)).toEqual([a.id]);
    // A cursor of the old form (`d:<position>`, no endpoint) is not this endpoint's either.
    expect(await call('events.delivery.list', p, { params: { webhook_id: a.id }, query: { cursor: Buffer.from('d:999999').toString('base64url') } })).toMatchObject({
      ok: false,
      error: { status: 400, code: 'validation_error' },
    });
  });

  it('sets delivered_at to when the receiver answered, not when the attempt started', async () => {
    const slow = await holdingReceiver();
    const { held } = slow;
    try {
      const p = partner([]);
      const hook = await createHook(p, slow.url, ['device.removed']);
      await call('events.webhook.test', p, { params: { webhook_id: hook.id } });
      await waitFor(() => held.length === 1, { what: 'the attempt to reach the receiver' });
      const arrived = Date.now();
      // The clock has moved past the attempt's start (which came before its arrival here).
      await waitFor(() => Date.now() > arrived, { what: 'the next millisecond' });
      const answeredFrom = Date.now();
      held[0]!.writeHead(204).end();
      const delivered = await waitFor(async () => {
        const [d] = ((await call('events.delivery.list', p, { params: { webhook_id: hook.id } })) as unknown as Listed).body.deliveries;
        return d?.state === 'succeeded' ? (d as { delivered_at: string; last_attempt: { at: string; duration_ms: number } }) : undefined;
      }, { what: 'the delivery settled' });
      expect(Date.parse(delivered.delivered_at)).toBeGreaterThanOrEqual(answeredFrom);
      expect(Date.parse(delivered.delivered_at)).toBeGreaterThan(Date.parse(delivered.last_attempt.at));
      expect(Date.parse(delivered.delivered_at)).toBe(Date.parse(delivered.last_attempt.at) + delivered.last_attempt.duration_ms);
    } finally {
      slow.close();
    }
  });

  it('redelivers a delivery asked again during an attempt after that attempt, never beside it', async () => {
    const slow = await holdingReceiver();
    const { held } = slow;
    try {
      const p = partner([]);
      const hook = await createHook(p, slow.url, ['device.removed']);
      const sent = (await call('events.webhook.test', p, { params: { webhook_id: hook.id } })) as unknown as { body: { id: string } };
      await waitFor(() => held.length === 1, { what: 'the first attempt, held by the receiver' });
      const redelivered = await call('events.delivery.redeliver', p, { params: { webhook_id: hook.id, delivery_id: sent.body.id } });
      expect(redelivered).toMatchObject({ ok: true, status: 202, body: { id: sent.body.id, state: 'pending', attempts: 0, delivered_at: null } });
      // The worker looks again (a delivery of another endpoint queued after the redelivery goes
      // out): the redelivery did not start a second attempt while the first is in flight.
      const marker = await createHook(p, receiver.url, ['device.removed']);
      await call('events.webhook.test', p, { params: { webhook_id: marker.id } });
      await waitFor(() => receiver.received.length === 1, { what: 'the other endpoint’s delivery' });
      expect(held).toHaveLength(1);
      // The first attempt is answered: its outcome is logged, and the redelivery goes out after it.
      held[0]!.writeHead(204).end();
      await waitFor(() => held.length === 2, { what: 'the redelivery, once the first attempt is over' });
      const between = ((await call('events.delivery.list', p, { params: { webhook_id: hook.id } })) as unknown as Listed).body.deliveries[0];
      expect(between).toMatchObject({ id: sent.body.id, state: 'pending', attempts: 0, delivered_at: null, last_attempt: { status: 204, error: null } });
      held[1]!.writeHead(204).end();
      const settled = await waitFor(async () => {
        const [d] = ((await call('events.delivery.list', p, { params: { webhook_id: hook.id } })) as unknown as Listed).body.deliveries;
        return d?.state === 'succeeded' ? d : undefined;
      }, { what: 'the redelivery settled' });
      expect(settled).toMatchObject({ id: sent.body.id, attempts: 1, next_attempt_at: null, last_attempt: { status: 204 } });
      expect(slow.mostOpen()).toBe(1);
      expect(held).toHaveLength(2);
    } finally {
      slow.close();
    }
  });

  it('refuses a test event to a disabled endpoint (409) and holds its pending deliveries until it is enabled again', async () => {
    const p = partner([]);
    const hook = await createHook(p, receiver.url, ['device.removed']);
    const sent = (await call('events.webhook.test', p, { params: { webhook_id: hook.id } })) as unknown as { body: { id: string } };
    await waitFor(() => receiver.received.length === 1, { what: 'the test event' });
    expect(await call('events.webhook.update', p, { params: { webhook_id: hook.id }, body: { enabled: false } })).toMatchObject({ ok: true, body: { enabled: false } });

    const refused = await call('events.webhook.test', p, { params: { webhook_id: hook.id } });
    expect(refused).toMatchObject({ ok: false, error: { status: 409, code: 'webhook_disabled' } });
    expect((refused as unknown as { error: { message: string } }).error.message).toMatch(/disabled/);
    // Nothing was queued by the refused test.
    const listed = (await call('events.delivery.list', p, { params: { webhook_id: hook.id } })) as unknown as Listed;
    expect(listed.body.deliveries).toHaveLength(1);

    // A redelivery is taken, and held: pending, with no attempt due while the endpoint is disabled.
    const redelivered = await call('events.delivery.redeliver', p, { params: { webhook_id: hook.id, delivery_id: sent.body.id } });
    expect(redelivered).toMatchObject({ ok: true, status: 202, body: { state: 'pending', next_attempt_at: null } });
    const held = ((await call('events.delivery.list', p, { params: { webhook_id: hook.id } })) as unknown as Listed).body.deliveries[0];
    expect(held).toMatchObject({ id: sent.body.id, state: 'pending', next_attempt_at: null });
    // Even one whose next attempt was due much later is sent as soon as the endpoint is enabled again.
    await testDb.db.delivery.update({ where: { id: sent.body.id }, data: { nextAttemptAt: new Date(Date.now() + 3_600_000) } });
    expect(await call('events.webhook.update', p, { params: { webhook_id: hook.id }, body: { enabled: true } })).toMatchObject({ ok: true, body: { enabled: true } });
    await waitFor(() => receiver.received.length === 2, { what: 'the held delivery sent on re-enabling' });
    const settled = await waitFor(async () => {
      const [d] = ((await call('events.delivery.list', p, { params: { webhook_id: hook.id } })) as unknown as Listed).body.deliveries;
      return d?.state === 'succeeded' ? d : undefined;
    });
    expect(settled).toMatchObject({ id: sent.body.id, next_attempt_at: null });
    // Enabled again, a test is sent.
    expect(await call('events.webhook.test', p, { params: { webhook_id: hook.id } })).toMatchObject({ ok: true, status: 202 });
    await waitFor(() => receiver.received.length === 3, { what: 'the test event after re-enabling' });
  });
});

describe('sharing the work', () => {
  it('two replicas (fan-out and delivery each) deliver every event once between them', async () => {
    const receiver = await new WebhookReceiver().start();
    const second = new DeliveryWorker({
      db: testDb.db,
      client,
      secretsKey: KEY,
      schedule: [100],
      timeoutMs: 2000,
      concurrency: 16,
      perEndpoint: 4,
      logger,
      pollMs: 100,
    });
    const timeouts = { cacheMs: 0, timeoutMs: 2000 };
    const registryClient = new RegistryClient(bus, { timeoutMs: 2000, logger });
    const secondFanout = fanoutConsumer(
      bus.connection,
      { db: testDb.db, access: new PartnerAccessDirectory(bus, timeouts), places: new DevicePlaces(registryClient, testDb.db, timeouts), logger, stored: () => second.nudge() },
      { stream: PARTNER_EVENTS_STREAM, durable: fanoutDurable },
    );
    second.start();
    secondFanout.start();
    try {
      const p = partner(['health_read'], [1]);
      const hook = await createHook(p, receiver.url, ['device.connected']);
      receiver.trust(hook.secret);
      const ids: string[] = [];
      for (let i = 0; i < 30; i += 1) ids.push(await publish('device.connected', device([1]), connected()));
      await waitFor(() => new Set(eventsOf(receiver).map((e) => e.id)).size === 30, { timeoutMs: 10_000, what: 'every event' });
      expect(eventsOf(receiver).map((e) => e.id).sort()).toEqual([...ids].sort());
      expect(receiver.received.every((d) => d.verified)).toBe(true);
    } finally {
      await secondFanout.stop();
      await second.stop();
      await receiver.close();
    }
  }, 20_000);

  it('a receiver that hangs holds only its own share: another partner’s event goes out meanwhile', async () => {
    const hanging = http.createServer(() => undefined);
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', () => resolve()));
    const receiver = await new WebhookReceiver().start();
    try {
      const slow = partner(['health_read'], [1]);
      await createHook(slow, `http://127.0.0.1:${(hanging.address() as { port: number }).port}/hook`, ['device.connected']);
      const quick = partner(['health_read'], [1]);
      await createHook(quick, receiver.url, ['device.connected']);
      // More deliveries for the hanging endpoint than the replica sends at once (16), each held for the whole timeout.
      for (let i = 0; i < 20; i += 1) await publish('device.connected', device([1]), connected());
      const started = Date.now();
      // The quick endpoint subscribes to the same type: it gets those twenty too, while the hanging one holds its share (4).
      await waitFor(() => receiver.received.length >= 20, { timeoutMs: 1_500, what: 'the other partner’s deliveries before the hanging receiver times out (2 s)' });
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      hanging.closeAllConnections();
      hanging.close();
      await receiver.close();
    }
  });

  it('a hanging receiver with a long backlog of due deliveries holds only its own share: another endpoint’s later delivery goes out', async () => {
    const hanging = http.createServer((req) => req.resume());
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', () => resolve()));
    const attempts = () => new Promise<number>((resolve) => hanging.getConnections((_err, n) => resolve(n)));
    const receiver = await new WebhookReceiver().start();
    const slow = partner(['health_read'], [1]);
    const slowHook = await createHook(slow, `http://127.0.0.1:${(hanging.address() as { port: number }).port}/hook`, ['device.connected']);
    try {
      // A backlog of older due deliveries (one device each, so none waits for another), far
      // more than the replica takes at once (16): the receiver was down while they came.
      const backlog = Array.from({ length: 200 }, () => {
        const id = newDeliveryId();
        const deviceId = randomDeviceId();
        const event = newPartnerEvent('device.connected', { deviceId, data: connected() }).event;
        return { id, webhookId: slowHook.id, partnerId: slow.partner_id, eventId: event.id, eventType: event.type, deviceId, orderingKey: deviceId, event };
      });
      await insertDeliveries(testDb.db, backlog);
      worker.nudge();
      // The hanging receiver holds its share (4) of attempts, each for the whole timeout (2 s).
      await waitFor(async () => (await attempts()) === 4, { what: 'the hanging endpoint’s share of attempts' });
      const quick = partner([]);
      const quickHook = await createHook(quick, receiver.url, ['device.removed']);
      await call('events.webhook.test', quick, { params: { webhook_id: quickHook.id } });
      await waitFor(() => receiver.received.length === 1, { timeoutMs: 1_500, what: 'the other endpoint’s delivery before the hanging attempts time out (2 s)' });
      expect(await attempts()).toBe(4);
    } finally {
      hanging.closeAllConnections();
      hanging.close();
      await receiver.close();
      // The backlog goes no further: the rest of the file is not slowed by it.
      await testDb.db.delivery.deleteMany({ where: { webhookId: slowHook.id } });
    }
  });

  it('refuses receivers on loopback, private or link-local addresses, and plain http, outside the local fleet', async () => {
    const prefix = uniqueId('guard');
    const guardedBus = await Bus.connect({ servers: nats.url, service: 'events', logger, requestTimeoutMs: 3000, subjectPrefix: `${prefix}.` });
    try {
      serveEvents(guardedBus, { db: testDb.db, secretsKey: KEY, policy: { local: false }, webhooksPerPartner: 20, queued: () => undefined, tickets: streams, registry: new RegistryClient(bus, { timeoutMs: 2000, logger }) });
      const p = partner([]);
      const create = (url: string) =>
        guardedBus.request('events.webhook.create', { request_id: uniqueId('req'), principal: p, params: {}, query: {}, body: { url, event_types: ['device.removed'] } } as never);
      for (const url of ['https://127.0.0.1/hook', 'https://10.0.0.7/hook', 'https://169.254.169.254/latest', 'https://[::1]/hook', 'https://localhost/hook', 'http://93.184.216.34/hook']) {
        expect({ url, reply: await create(url) }).toMatchObject({ url, reply: { ok: false, error: { status: 400, code: 'validation_error' } } });
      }
      // A name that does not resolve yet is taken: each delivery checks the addresses it connects to.
      expect(await create('https://receiver-not-set-up-yet.invalid/hook')).toMatchObject({ ok: true, status: 201 });
    } finally {
      await guardedBus.drain();
    }
  });

  it('refuses link-local and unspecified receivers in the local fleet too (metadata endpoints)', async () => {
    const p = partner([]);
    for (const url of ['http://169.254.169.254/latest/meta-data', 'https://169.254.1.1/hook', 'http://0.0.0.0:8080/hook', 'http://0/hook', 'http://[::]/hook', 'http://[fe80::1]/hook', 'http://[::ffff:169.254.169.254]/hook', 'http://[::169.254.169.254]/hook', 'http://[::a9fe:a9fe]/hook']) {
      expect({ url, reply: await call('events.webhook.create', p, { body: { url, event_types: ['device.removed'] } }) }).toMatchObject({ url, reply: { ok: false, error: { status: 400, code: 'validation_error' } } });
    }
    const hook = await createHook(p, 'http://127.0.0.1:1/hook', ['device.removed']);
    expect(await call('events.webhook.update', p, { params: { webhook_id: hook.id }, body: { url: 'http://169.254.169.254/latest' } })).toMatchObject({ ok: false, error: { status: 400, code: 'validation_error' } });
    // Loopback and private receivers stay allowed there.
    expect(await call('events.webhook.update', p, { params: { webhook_id: hook.id }, body: { url: 'http://10.0.0.7:8080/hook' } })).toMatchObject({ ok: true });
  });
});

describe('live stream', () => {
  /** Opens a stream and collects its events until closed. */
  async function open(p: Principal, query: Record<string, string> = {}): Promise<Partial<Awaited<ReturnType<typeof read>>> & { error?: unknown }> {
    const reply = await call('events.stream.open', p, { query });
    if (!reply.ok) return { error: reply.error };
    return read((reply.body as { url: string }).url);
  }

  /** Reads a stream's URL and collects its events until closed. */
  async function read(url: string) {
    const events: Array<{ id: number; type: string; data: Record<string, unknown> }> = [];
    let buffer = '';
    const request = http.get(url);
    const response = await new Promise<http.IncomingMessage>((resolve) => request.on('response', resolve));
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => {
      buffer += chunk;
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const fields = Object.fromEntries(frame.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]));
        if (fields.id && fields.data) events.push({ id: Number(fields.id), type: fields.event as string, data: JSON.parse(fields.data as string) });
      }
    });
    return { events, status: response.statusCode, close: () => request.destroy() };
  }

  it('streams what the partner may see, and resumes after Last-Event-ID with nothing missed or twice', async () => {
    const p = partner(['health_read'], [4]);
    const mine = device([1, 4]);
    const notMine = device([1, 5]);
    const first = await open(p);
    expect(first.status).toBe(200);
    const a = await publish('device.connected', mine, connected());
    await publish('device.connected', notMine, connected());
    await waitFor(() => first.events!.length === 1, { what: 'the first event' });
    first.close!();
    const lastSeen = first.events![0]!.id;
    const b = await publish('device.connected', mine, connected());
    const c = await publish('device.removed', mine, { product: 'light', org_node_id: 4 }, [4]);
    const resumed = await open(p, { last_event_id: String(lastSeen) });
    await waitFor(() => resumed.events!.length === 2, { what: 'the missed events' });
    expect([first.events![0]!.data.id, ...resumed.events!.map((e) => e.data.id)]).toEqual([a, b, c]);
    resumed.close!();
  });

  it('replays each event to the partners whose scope held the device when it happened, not where it is now', async () => {
    const jsm = await bus.connection.jetstreamManager();
    const before = (await jsm.streams.info(PARTNER_EVENTS_STREAM)).state.last_seq;
    const oldOrg = partner(['system_read'], [10]);
    const newOrg = partner(['system_read'], [11]);
    const oldHooks = await new WebhookReceiver().start();
    const newHooks = await new WebhookReceiver().start();
    try {
      await createHook(oldOrg, oldHooks.url, ['system.ack_received', 'system.log_received', 'device.moved']);
      await createHook(newOrg, newHooks.url, ['system.ack_received', 'system.log_received', 'device.moved']);
      registry.orgPaths.set(11, [1, 11]);
      const id = device([1, 10]);
      const neighbour = device([1, 10]);
      const ack = await publish('system.ack_received', id, { line: 'query>ok' });
      const log = await publish('system.log_received', id, { line: 'booted' });
      // Delivered live where the device was (as the audit saw it)...
      await waitFor(() => eventsOf(oldHooks).length === 2, { what: 'the events before the move, live' });
      // ...then the registry moves the device (its answer changes) and its event follows.
      registry.described.set(id, { ...registry.described.get(id)!, org_node: { id: 11, parent_id: 1, name: 'n11' } });
      const moved = await publish('device.moved', id, { from_org_node_id: 10, to_org_node_id: 11 }, [10, 11]);
      const later = await publish('system.log_received', id, { line: 'after the move' });
      const marker = await publish('system.log_received', neighbour, { line: 'still at 10' });
      // Live (webhooks): each partner got what happened in its scope.
      await waitFor(() => eventsOf(oldHooks).some((e) => e.id === marker) && eventsOf(newHooks).some((e) => e.id === later), { what: 'the live deliveries' });
      // In order per device (the neighbour's marker may come before the move: another device).
      const oldDelivered = eventsOf(oldHooks).map((e) => e.id);
      expect([...oldDelivered].sort()).toEqual([ack, log, moved, marker].sort());
      expect(oldDelivered.filter((e) => e !== marker)).toEqual([ack, log, moved]);
      expect(eventsOf(newHooks).map((e) => e.id)).toEqual([moved, later]);
      // Each side of the move sees only its own node.
      expect(eventsOf(oldHooks).find((e) => e.id === moved)?.data).toEqual({ from_org_node_id: 10, to_org_node_id: null });
      expect(eventsOf(newHooks).find((e) => e.id === moved)?.data).toEqual({ from_org_node_id: null, to_org_node_id: 11 });

      // Replayed from before all of it, the stream says the same.
      const oldStream = await open(oldOrg, { last_event_id: String(before) });
      const newStream = await open(newOrg, { last_event_id: String(before) });
      await waitFor(() => oldStream.events!.some((e) => e.data.id === marker) && newStream.events!.some((e) => e.data.id === later), { what: 'the replays' });
      oldStream.close!();
      newStream.close!();
      expect(oldStream.events!.map((e) => e.data.id)).toEqual([ack, log, moved, marker]);
      expect(newStream.events!.map((e) => e.data.id)).toEqual([moved, later]);
      expect(newStream.events!.find((e) => e.data.id === moved)?.data.data).toEqual({ from_org_node_id: null, to_org_node_id: 11 });
    } finally {
      await oldHooks.close();
      await newHooks.close();
    }
  });

  it('fans a batch out by where the device was at each of its events, a move in the same batch included', async () => {
    const oldOrg = partner(['system_read'], [20]);
    const newOrg = partner(['system_read'], [21]);
    const oldHook = await createHook(oldOrg, 'http://127.0.0.1:1/old', ['system.log_received', 'device.moved']);
    const newHook = await createHook(newOrg, 'http://127.0.0.1:1/new', ['system.log_received', 'device.moved']);
    registry.orgPaths.set(21, [1, 21]);
    const id = device([1, 20]);
    // The registry already answers the new node: the move committed before the fan-out read the batch.
    registry.described.set(id, { ...registry.described.get(id)!, org_node: { id: 21, parent_id: 1, name: 'n21' } });
    const at = (type: PartnerEventType, data: Record<string, unknown>, orgNodeIds?: number[]) => newPartnerEvent(type, { deviceId: id, data, ...(orgNodeIds ? { orgNodeIds } : {}) });
    const batch = [at('system.log_received', { line: 'before' }), at('device.moved', { from_org_node_id: 20, to_org_node_id: 21 }, [20, 21]), at('system.log_received', { line: 'after' })];
    // Positions far beyond this test's stream, in order.
    const positions = batch.map((message, i) => ({ seq: 1_000_000_000 + i, message }));
    const timeouts = { cacheMs: 60_000, timeoutMs: 2000 };
    const places = new DevicePlaces(new RegistryClient(bus, { timeoutMs: 2000, logger }), testDb.db, timeouts);
    await fanOutBatch({ db: testDb.db, access: new PartnerAccessDirectory(bus, timeouts), places, logger, stored: () => undefined }, positions);
    const of = async (hookId: string) => (await testDb.db.delivery.findMany({ where: { webhookId: hookId }, orderBy: { seq: 'asc' } })).map((d) => d.eventId);
    expect(await of(oldHook.id)).toEqual([batch[0]!.event.id, batch[1]!.event.id]);
    expect(await of(newHook.id)).toEqual([batch[1]!.event.id, batch[2]!.event.id]);
  });

  it('filters by type and device, and bounds the partner’s open streams', async () => {
    const p = partner(['health_read'], [4]);
    const d1 = device([4]);
    const d2 = device([4]);
    registry.devices.set(d1, { device_id: d1, product: 'light', org_node_id: 4, name: null });
    const s1 = await open(p, { types: 'device.removed', device_id: d1 });
    expect(s1.status).toBe(200);
    const s2 = await open(p);
    expect(s2.status).toBe(200);
    const third = await open(p);
    expect(third.error).toMatchObject({ status: 429, code: 'rate_limited' });
    await publish('device.connected', d1, connected());
    const wanted = await publish('device.removed', d1, { product: 'light', org_node_id: 4 }, [4]);
    await publish('device.removed', d2, { product: 'light', org_node_id: 4 }, [4]);
    await waitFor(() => s2.events!.length === 3, { what: 'the unfiltered stream' });
    expect(s1.events!.map((e) => e.data.id)).toEqual([wanted]);
    s1.close!();
    // A closed stream frees its place.
    const again = await waitFor(async () => {
      const s = await open(p);
      return s.status === 200 ? s : (undefined as never);
    });
    again.close!();
    s2.close!();
    expect(await call('events.stream.open', p, { query: { types: 'nope.nope' } })).toMatchObject({ ok: false, error: { status: 400 } });
    expect(await call('events.stream.open', p, { query: { device_id: randomDeviceId() } })).toMatchObject({ ok: false, error: { status: 404 } });
  });

  describe('judging what a stream received together', () => {
    /** A stream server of its own, whose look-ups of places are watched: the fan-out's are not counted. */
    let server: StreamServer;
    let placesOf: jest.SpyInstance<ReturnType<DevicePlaces['placesOf']>, Parameters<DevicePlaces['placesOf']>>;
    /** The event ids of each look-up of places. */
    const lookUps = () => placesOf.mock.calls.map(([events]) => events.map((e) => e.message.event.id));

    beforeAll(async () => {
      const timeouts = { cacheMs: 0, timeoutMs: 2000 };
      const places = new DevicePlaces(new RegistryClient(bus, { timeoutMs: 2000, logger }), testDb.db, timeouts);
      placesOf = jest.spyOn(places, 'placesOf');
      const access = new PartnerAccessDirectory(bus, timeouts);
      server = new StreamServer({ nc: bus.connection, db: testDb.db, access, places, stream: PARTNER_EVENTS_STREAM, maxPerPartner: 2, keepAliveMs: 60_000, logger });
      await server.listen(0, '127.0.0.1');
    });
    afterAll(() => server?.close());
    beforeEach(() => placesOf.mockClear());

    const lastPosition = async () => (await (await bus.connection.jetstreamManager()).streams.info(PARTNER_EVENTS_STREAM)).state.last_seq;
    const replay = async (p: Principal, after: number) => read((await server.issue({ partner: p, types: [], after }))!);

    it('looks up the places of a burst in fewer round trips than events, each event judged once, in order', async () => {
      const p = partner(['health_read'], [4]);
      const mine = device([1, 4]);
      const notMine = device([1, 5]);
      const after = await lastPosition();
      const published: string[] = [];
      for (let i = 0; i < 20; i++) published.push(await publish('device.connected', i % 2 === 0 ? mine : notMine, connected()));
      const stream = await replay(p, after);
      await waitFor(() => stream.events.length === 10, { what: 'the burst' });
      stream.close();
      expect(stream.events.map((e) => e.data.id)).toEqual(published.filter((_, i) => i % 2 === 0));
      expect(stream.events.map((e) => e.id)).toEqual([...stream.events.map((e) => e.id)].sort((a, b) => a - b));
      expect(lookUps().flat()).toEqual(published);
      expect(placesOf.mock.calls.length).toBeLessThan(published.length);
    });

    it('judges the events of one look-up each at its own position: a move between them counts', async () => {
      const oldOrg = partner(['system_read'], [30]);
      const newOrg = partner(['system_read'], [31]);
      registry.orgPaths.set(31, [1, 31]);
      const id = device([1, 30]);
      const neighbour = device([1, 30]);
      const after = await lastPosition();
      const before = await publish('system.log_received', id, { line: 'before' });
      registry.described.set(id, { ...registry.described.get(id)!, org_node: { id: 31, parent_id: 1, name: 'n31' } });
      const moved = await publish('device.moved', id, { from_org_node_id: 30, to_org_node_id: 31 }, [30, 31]);
      const later = await publish('system.log_received', id, { line: 'after' });
      const marker = await publish('system.log_received', neighbour, { line: 'still at 30' });
      // The fan-out has recorded the move: the history says where the device was before it.
      await waitFor(() => testDb.db.placeChange.findUnique({ where: { eventId: moved } }).then((c) => c ?? undefined), { what: 'the move recorded' });
      const oldStream = await replay(oldOrg, after);
      const newStream = await replay(newOrg, after);
      await waitFor(() => oldStream.events.some((e) => e.data.id === marker) && newStream.events.some((e) => e.data.id === later), { what: 'the replays' });
      oldStream.close();
      newStream.close();
      expect(oldStream.events.map((e) => e.data.id)).toEqual([before, moved, marker]);
      expect(newStream.events.map((e) => e.data.id)).toEqual([moved, later]);
      // Both streams judged the events on either side of the move in one look-up.
      expect(lookUps().filter((ids) => ids.includes(before) && ids.includes(later))).toHaveLength(2);
    });
  });
});

/** A receiver that holds every delivery until the test answers it (`held`), counting how many were open at once. */
async function holdingReceiver(): Promise<{ url: string; held: http.ServerResponse[]; mostOpen: () => number; close: () => void }> {
  const held: http.ServerResponse[] = [];
  let open = 0;
  let mostOpen = 0;
  const server = http.createServer((req, res) => {
    open += 1;
    mostOpen = Math.max(mostOpen, open);
    res.on('finish', () => (open -= 1));
    req.resume();
    req.on('end', () => held.push(res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`,
    held,
    mostOpen: () => mostOpen,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}
