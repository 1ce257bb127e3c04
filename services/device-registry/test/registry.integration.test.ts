/**
 * The registry's request handlers on a real NATS server and a real Postgres database. The
 * mqtt-bridge is not under test here: a small responder on bridge.credential.* stands in for it
 * (BridgeStandIn), including a refusing and a silent one.
 */
import { randomBytes } from 'node:crypto';
import { JSONCodec } from 'nats';
import { checkReplyEnvelope, type PartnerEventMessage, type Principal, type ReplyEnvelope } from '@fleet/contracts';
import type { Bus, RequestOf } from '@fleet/service-kit';
import { randomDeviceId, uniqueId, waitFor } from '@fleet/test-kit';
import { BridgeClient } from '@fleet/bridge-client';
import { verifyBrokerPassword } from '../src/domain/broker-password';
import { decryptSettingsKey, deriveBrokerPassword, deriveSettingsKey, openSetting } from '../src/domain/crypto';
import { OutboxRelay } from '../src/handlers/outbox-relay';
import { RecentConnectivity } from '../src/handlers/recent-connectivity';
import { serveRegistry, type RegistrySubject } from '../src/handlers/registry';
import { createOrgNode } from '../src/store/orgs';
import { insertTelemetry } from '../src/store/telemetry';
import { BridgeStandIn, connectBus, createTestDb, logger, principal, startPrivateNats, type PrivateNats, type TestDb } from './support';

let nats: PrivateNats;
let testDb: TestDb;
let bus: Bus;
let bridge: BridgeStandIn;
let relay: OutboxRelay;
let recent: RecentConnectivity;
const kek = randomBytes(32);
const events: { device_id: string; change: string }[] = [];
/** The partner events the relay published (PARTNER_EVENTS), in order. */
const partnerEvents: PartnerEventMessage[] = [];
let org: { acme: number; north: number; depot: number; south: number; other: number; north2: number };

const admin = principal({ permissions: ['access_all_devices', 'health_read'] });

beforeAll(async () => {
  nats = await startPrivateNats();
  testDb = await createTestDb();
  bus = await connectBus(nats.url);
  bridge = new BridgeStandIn(bus.connection);
  relay = new OutboxRelay(testDb.db, bus.connection, logger);
  relay.start();
  // No durable consumer stores connectivity here: a device reads as connected only through what was heard.
  recent = new RecentConnectivity(bus.connection, 'evt.bridge.connectivity.>', logger);
  recent.start();
  serveRegistry(bus, { db: testDb.db, kek, broker: new BridgeClient(bus, { timeoutMs: 1000, logger }), logger, relay, recent });
  bus.connection.subscribe('evt.partner.>', { callback: (_e, m) => partnerEvents.push(JSONCodec<PartnerEventMessage>().decode(m.data)) });
  bus.connection.subscribe('evt.registry.device.changed.v1', {
    callback: (_e, m) => events.push(JSONCodec<{ device_id: string; change: string }>().decode(m.data)),
  });
  const db = testDb.db;
  const acme = (await createOrgNode(db, 'Acme', null)).id;
  const north = (await createOrgNode(db, 'North', acme)).id;
  const depot = (await createOrgNode(db, 'Depot', north)).id;
  const south = (await createOrgNode(db, 'South', acme)).id;
  const other = (await createOrgNode(db, 'Other', null)).id;
  // A second node called 'North' under South: ambiguous for a partner granted all of Acme.
  const north2 = (await createOrgNode(db, 'North', south)).id;
  org = { acme, north, depot, south, other, north2 };
});

afterAll(async () => {
  recent?.stop();
  bridge?.close();
  await relay?.stop();
  await bus?.drain();
  await testDb?.drop();
  await nats?.stop();
});

type Parts = { params?: Record<string, string>; query?: Record<string, unknown>; body?: Record<string, unknown> };

const envelopeOf = (p: Principal | undefined, parts: Parts) => ({
  request_id: uniqueId('req'),
  ...(p ? { principal: p } : {}),
  params: parts.params ?? {},
  query: parts.query ?? {},
  ...(parts.body ? { body: parts.body } : {}),
});

async function call(subject: RegistrySubject, p: Principal | undefined, parts: Parts = {}): Promise<ReplyEnvelope> {
  return bus.request(subject, envelopeOf(p, parts) as RequestOf<RegistrySubject>);
}

/** A request as a hand-made caller sends it, without the bus's own checks: what the registry itself answers. */
async function raw(subject: RegistrySubject, parts: Parts): Promise<ReplyEnvelope> {
  const reply = await bus.connection.request(subject, JSONCodec().encode(envelopeOf(undefined, parts)), { timeout: 3000 });
  return checkReplyEnvelope(JSONCodec().decode(reply.data));
}

const ok = (r: ReplyEnvelope) => {
  if (!r.ok) throw new Error(`expected success, got ${JSON.stringify(r.error)}`);
  return r;
};
const err = (r: ReplyEnvelope) => {
  if (r.ok) throw new Error(`expected an error, got ${JSON.stringify(r)}`);
  return r.error;
};

async function provision(p: Principal, body: Record<string, unknown>, id = randomDeviceId()): Promise<{ id: string; reply: ReplyEnvelope }> {
  const reply = await call('registry.device.provision', p, { params: { device_id: id }, body: { credential_format: 'derived-v1', ...body } });
  return { id, reply };
}

describe('provisioning', () => {
  it('generate: broker credential from the returned root secret, device at Staging, settings key stored encrypted', async () => {
    const upsertsBefore = bridge.upserts.length;
    const { id, reply } = await provision(admin, { name: 'Lobby light' });
    const r = ok(reply);
    expect(r.status).toBe(201);
    expect(r.headers).toEqual({ Location: `/v1/devices/${id}` });
    const body = r.body as Record<string, string>;
    expect(body).toEqual({ device_id: id, credential_format: 'derived-v1', product: 'light', password: expect.stringMatching(/^[\x21-\x7E]{16}$/), name: 'Lobby light' });
    expect(bridge.upserts.slice(upsertsBefore)).toEqual([{ device_id: id, product: 'light', password: deriveBrokerPassword(body.password as string, id, 'light') }]);

    const row = await testDb.db.device.findUniqueOrThrow({ where: { deviceId: id } });
    expect(row).toMatchObject({ orgNodeId: 1, product: 'light', name: 'Lobby light', credentialSource: 'generate', status: 'disconnected', automationEnabled: true });
    expect(JSON.stringify(row)).not.toContain(body.password);
    // The broker password is kept only as its hash, which the broker authentication hook checks.
    const brokerPassword = deriveBrokerPassword(body.password as string, id, 'light');
    expect(row.brokerPasswordHash).toMatch(/^scrypt\$1024\$8\$1\$/);
    expect(JSON.stringify(row)).not.toContain(brokerPassword);
    expect(await verifyBrokerPassword(brokerPassword, row.brokerPasswordHash as string)).toBe(true);
    expect(await verifyBrokerPassword(`${brokerPassword}x`, row.brokerPasswordHash as string)).toBe(false);
    expect(decryptSettingsKey(kek, id, row.settingsKeyCiphertext as string).equals(deriveSettingsKey(body.password as string, id, 'light'))).toBe(true);
    await waitFor(() => events.some((e) => e.device_id === id && e.change === 'provisioned'), { what: 'device.changed event' });
  });

  it('an id in use is 409 conflict and the broker is not touched', async () => {
    const { id } = await provision(admin, {});
    const before = bridge.upserts.length;
    const again = await provision(admin, { credential_source: 'root_secret', root_secret: 'Rt0!secret#Key42' }, id);
    expect(err(again.reply)).toMatchObject({ status: 409, code: 'conflict' });
    expect(bridge.upserts.length).toBe(before);
  });

  it('root_secret: the derived meter password, no password echoed; mqtt_password: verbatim, no settings key', async () => {
    const a = await provision(admin, { credential_source: 'root_secret', root_secret: 'Rt0!secret#Key42', product: 'meter', org: 'Acme' });
    expect(ok(a.reply).body).toEqual({ device_id: a.id, credential_format: 'derived-v1', product: 'meter', org: 'Acme' });
    expect(bridge.upserts.at(-1)).toEqual({ device_id: a.id, product: 'meter', password: deriveBrokerPassword('Rt0!secret#Key42', a.id, 'meter') });
    expect((await testDb.db.device.findUniqueOrThrow({ where: { deviceId: a.id } })).orgNodeId).toBe(org.acme);

    const pw = '0123456789abcdef0123456789abcdef';
    const b = await provision(admin, { credential_source: 'mqtt_password', mqtt_password: pw });
    expect(ok(b.reply).body).toEqual({ device_id: b.id, credential_format: 'derived-v1', product: 'light' });
    expect(bridge.upserts.at(-1)).toEqual({ device_id: b.id, product: 'light', password: pw });
    expect((await testDb.db.device.findUniqueOrThrow({ where: { deviceId: b.id } })).settingsKeyCiphertext).toBeNull();
    expect(err(await call('registry.settings.seal', undefined, { body: { device_id: b.id, key: 'wifiPass', value: 'x' } }))).toMatchObject({
      status: 409,
      code: 'encryption_unavailable',
    });
  });

  it('503 and nothing persists when the broker refuses or the bridge does not answer', async () => {
    for (const mode of ['refuse', 'silent'] as const) {
      bridge.mode = mode;
      try {
        const { id, reply } = await provision(admin, {});
        expect(err(reply)).toMatchObject({ status: 503, code: 'broker_unavailable' });
        expect(await testDb.db.device.findUnique({ where: { deviceId: id } })).toBeNull();
      } finally {
        bridge.mode = 'ok';
      }
    }
  });

  it('org placement: access-all names a root; org-scoped partners name one node in scope, with the exact messages', async () => {
    expect(err((await provision(admin, { org: 'North' })).reply)).toMatchObject({ status: 400, message: "unknown organization 'North'" });
    const scoped = principal({ permissions: ['device_provisioning'], org_grants: [org.north] });
    expect(err((await provision(scoped, {})).reply)).toMatchObject({ status: 400, code: 'validation_error' });
    expect(err((await provision(scoped, { org: 'South' })).reply)).toMatchObject({ status: 400, message: "unknown organization 'South'" });
    expect(err((await provision(scoped, { org: 'Nowhere' })).reply)).toMatchObject({ status: 400, message: "unknown organization 'Nowhere'" });
    const placed = await provision(scoped, { org: 'Depot' });
    ok(placed.reply);
    expect((await testDb.db.device.findUniqueOrThrow({ where: { deviceId: placed.id } })).orgNodeId).toBe(org.depot);
    // 'North' is unique within the North grant, ambiguous across all of Acme.
    ok((await provision(scoped, { org: 'North' })).reply);
    const wide = principal({ permissions: ['device_provisioning'], org_grants: [org.acme] });
    expect(err((await provision(wide, { org: 'North' })).reply)).toMatchObject({
      status: 400,
      code: 'validation_error',
      message: "organization 'North' is ambiguous: 2 organizations in your scope share that name",
    });
  });

  it('refuses a body that breaks a provision rule before touching the broker', async () => {
    const before = bridge.upserts.length;
    expect(err((await provision(admin, { credential_format: 'plain' })).reply)).toMatchObject({ status: 400, code: 'validation_error' });
    expect(err((await provision(admin, { mqtt_password: '0123456789abcdef0123456789abcdef' })).reply)).toMatchObject({ status: 400 });
    expect(err((await provision(admin, { product: 'kettle' })).reply)).toMatchObject({ status: 400 });
    expect(bridge.upserts.length).toBe(before);
  });
});

describe('reading devices and scope', () => {
  let inNorth: string;
  let inSouth: string;
  let inStaging: string;
  let meterInDepot: string;

  beforeAll(async () => {
    inNorth = (await provision(admin, { org: 'Acme' })).id;
    await testDb.db.device.update({ where: { deviceId: inNorth }, data: { orgNodeId: org.north } });
    inSouth = (await provision(admin, { org: 'Acme' })).id;
    await testDb.db.device.update({ where: { deviceId: inSouth }, data: { orgNodeId: org.south } });
    inStaging = (await provision(admin, {})).id;
    meterInDepot = (await provision(admin, { product: 'meter', org: 'Acme' })).id;
    await testDb.db.device.update({ where: { deviceId: meterInDepot }, data: { orgNodeId: org.depot } });
  });

  it('resolves scope: a granted subtree or access-all; out of scope and nonexistent are the same 404', async () => {
    const scoped = principal({ org_grants: [org.north] });
    expect(ok(await call('registry.scope.resolve', scoped, { params: { device_id: meterInDepot } })).body).toEqual({
      device_id: meterInDepot,
      product: 'meter',
      org_node_id: org.depot,
      name: null,
    });
    for (const id of [inSouth, inStaging, randomDeviceId()]) {
      expect(err(await call('registry.scope.resolve', scoped, { params: { device_id: id } }))).toMatchObject({ status: 404, code: 'not_found' });
    }
    ok(await call('registry.scope.resolve', admin, { params: { device_id: inStaging } }));
    ok(await call('registry.scope.resolve', principal({ org_grants: [1] }), { params: { device_id: inStaging } }));
    expect(err(await call('registry.scope.resolve', principal(), { params: { device_id: inNorth } })).status).toBe(404);
  });

  it('lists the scope in device-id order with the product filter; unknown product is 400', async () => {
    const scoped = principal({ org_grants: [org.north], allowed_channels: ['light2'] });
    const listed = ok(await call('registry.device.list', scoped)).body as { devices: Record<string, unknown>[] };
    expect(listed.devices.map((d) => d.device_id)).toEqual([...listed.devices.map((d) => d.device_id as string)].sort());
    expect(listed.devices.map((d) => d.device_id)).toEqual(expect.arrayContaining([inNorth, meterInDepot]));
    expect(listed.devices.map((d) => d.device_id)).not.toContain(inSouth);
    expect(listed.devices.find((d) => d.device_id === inNorth)).toEqual({ device_id: inNorth, name: null, product: 'light', channels: ['light2'], automation_enabled: true });
    expect(listed.devices.find((d) => d.device_id === meterInDepot)).toEqual({ device_id: meterInDepot, name: null, product: 'meter' });

    const meters = ok(await call('registry.device.list', scoped, { query: { product: 'meter' } })).body as { devices: { device_id: string }[] };
    expect(meters.devices.map((d) => d.device_id)).toEqual([meterInDepot]);
    expect(err(await call('registry.device.list', scoped, { query: { product: 'toaster' } }))).toMatchObject({ status: 400, code: 'validation_error' });

    const all = ok(await call('registry.device.list', admin)).body as { devices: Record<string, unknown>[] };
    expect(all.devices.map((d) => d.device_id)).toEqual(expect.arrayContaining([inNorth, inSouth, inStaging, meterInDepot]));
    expect(all.devices.find((d) => d.device_id === inStaging)).toMatchObject({ status: 'disconnected', status_changed_at: null, last_seen_at: null });
    expect(ok(await call('registry.device.list', principal())).body).toEqual({ devices: [] });
  });

  it('gets one device; 404 out of scope', async () => {
    const scoped = principal({ org_grants: [org.north], permissions: ['health_read'] });
    expect(ok(await call('registry.device.get', scoped, { params: { device_id: inNorth } })).body).toMatchObject({ device_id: inNorth, status: 'disconnected' });
    expect(err(await call('registry.device.get', scoped, { params: { device_id: inSouth } })).status).toBe(404);
  });

  it('org tree: granted subtrees as a forest, everything with access-all, empty without grants', async () => {
    const forest = ok(await call('registry.org.tree', principal({ org_grants: [org.north, org.other] }))).body as { nodes: unknown[] };
    expect(forest.nodes).toEqual([
      { id: org.north, parent_id: null, name: 'North' },
      { id: org.depot, parent_id: org.north, name: 'Depot' },
      { id: org.other, parent_id: null, name: 'Other' },
    ]);
    const whole = ok(await call('registry.org.tree', admin)).body as { nodes: { id: number; name: string; parent_id: number | null }[] };
    expect(whole.nodes[0]).toEqual({ id: 1, parent_id: null, name: 'Staging / Inventory' });
    expect(whole.nodes).toHaveLength(7);
    expect(ok(await call('registry.org.tree', principal())).body).toEqual({ nodes: [] });
  });

  it('rename, move and the automation switch', async () => {
    const scoped = principal({ org_grants: [org.north] });
    const target = { params: { device_id: inNorth } };
    expect(ok(await call('registry.device.rename', scoped, { ...target, body: { name: 'Hall' } })).status).toBe(204);
    expect(err(await call('registry.device.rename', scoped, { ...target, body: { name: '' } })).status).toBe(400);
    expect(err(await call('registry.device.rename', scoped, { params: { device_id: inSouth }, body: { name: 'x' } })).status).toBe(404);

    expect(ok(await call('registry.device.move', scoped, { ...target, body: { org_node_id: org.depot } })).status).toBe(204);
    expect(err(await call('registry.device.move', scoped, { ...target, body: { org_node_id: org.south } }))).toMatchObject({ status: 403, code: 'node_out_of_scope' });
    expect(err(await call('registry.device.move', scoped, { ...target, body: { org_node_id: null } }))).toMatchObject({ status: 409, code: 'would_lose_access' });
    expect(ok(await call('registry.device.move', admin, { ...target, body: { org_node_id: null } })).status).toBe(204);
    expect(await testDb.db.device.findUniqueOrThrow({ where: { deviceId: inNorth } })).toMatchObject({ name: 'Hall', orgNodeId: 1 });
    await waitFor(() => ['updated', 'moved'].every((c) => events.some((e) => e.device_id === inNorth && e.change === c)), { what: 'updated and moved events' });

    expect(ok(await call('registry.device.automation', admin, { ...target, body: { enabled: false } })).body).toEqual({ device_id: inNorth, automation_enabled: false });
    expect((ok(await call('registry.device.get', admin, target)).body as { automation_enabled: boolean }).automation_enabled).toBe(false);
    expect(err(await call('registry.device.automation', admin, { params: { device_id: meterInDepot }, body: { enabled: false } })).status).toBe(404);
  });

  it('health: connectivity fields and telemetry within hours, newest first, at most limit', async () => {
    const now = Date.now();
    // Telemetry received before a record was created is not stored: the record predates the rows below.
    await testDb.db.device.update({ where: { deviceId: inSouth }, data: { createdAt: new Date(now - 3600_000 * 48) } });
    await insertTelemetry(testDb.db, [
      { deviceId: inSouth, createdAt: new Date(now - 3600_000 * 30), topic: `light/${inSouth}/tele/heartbeat`, payload: '{"old":true}' },
      { deviceId: inSouth, createdAt: new Date(now - 120_000), topic: `light/${inSouth}/tele/heartbeat`, payload: '{"uptime_s":1}' },
      { deviceId: inSouth, createdAt: new Date(now - 60_000), topic: `light/${inSouth}/tele/heartbeat`, payload: '{"uptime_s":2}' },
    ]);
    const h = ok(await call('registry.device.health', admin, { params: { device_id: inSouth } })).body as { telemetry: { payload: string }[] };
    expect(h).toMatchObject({ device_id: inSouth, status: 'disconnected', status_changed_at: null, last_seen_at: null });
    expect(h.telemetry.map((t) => t.payload)).toEqual(['{"uptime_s":2}', '{"uptime_s":1}']);
    const wide = ok(await call('registry.device.health', admin, { params: { device_id: inSouth }, query: { hours: 48, limit: 2 } })).body as { telemetry: unknown[] };
    expect(wide.telemetry).toHaveLength(2);
    const all = ok(await call('registry.device.health', admin, { params: { device_id: inSouth }, query: { hours: 48 } })).body as { telemetry: unknown[] };
    expect(all.telemetry).toHaveLength(3);
    expect(err(await call('registry.device.health', admin, { params: { device_id: inSouth }, query: { hours: 721 } })).status).toBe(400);
    expect(err(await call('registry.device.health', admin, { params: { device_id: inSouth }, query: { limit: 501 } })).status).toBe(400);
  });

  it('reads a device however deep below its granted root it sits, as the listing shows it', async () => {
    let node = (await createOrgNode(testDb.db, `Deep ${uniqueId()}`, null)).id;
    const root = node;
    for (let level = 0; level < 80; level += 1) node = (await createOrgNode(testDb.db, `L${level}`, node)).id;
    const deep = (await provision(admin, {})).id;
    await testDb.db.device.update({ where: { deviceId: deep }, data: { orgNodeId: node } });
    const scoped = principal({ org_grants: [root] });
    const listed = ok(await call('registry.device.list', scoped)).body as { devices: { device_id: string }[] };
    expect(listed.devices.map((d) => d.device_id)).toEqual([deep]);
    expect(ok(await call('registry.device.get', scoped, { params: { device_id: deep } })).body).toMatchObject({ device_id: deep });
    ok(await call('registry.scope.resolve', scoped, { params: { device_id: deep } }));
  });
});

describe('connectivity for other services', () => {
  it("answers a device's connectivity without a principal, and 404 for an unknown device", async () => {
    const { id } = await provision(admin, {});
    expect(ok(await call('registry.device.connectivity', undefined, { body: { device_id: id } })).body).toEqual({
      status: 'disconnected',
      status_changed_at: null,
      last_seen_at: null,
    });
    expect(err(await call('registry.device.connectivity', undefined, { body: { device_id: randomDeviceId() } })).status).toBe(404);
    expect(err(await raw('registry.device.connectivity', { body: { device_id: 'nope' } })).status).toBe(400);
  });

  const report = (deviceId: string, kind: 'seen' | 'offline', at: Date) =>
    bus.connection.publish('evt.bridge.connectivity.batch.v1', JSONCodec().encode({ events: [{ device_id: deviceId, product: 'light', kind, at: at.toISOString() }] }));

  it('reads a device as connected as soon as a bridge reports it, before the report is stored', async () => {
    const { id } = await provision(admin, {});
    const seenAt = new Date();
    report(id, 'seen', seenAt);
    const view = await waitFor(async () => {
      const body = ok(await call('registry.device.get', admin, { params: { device_id: id } })).body as Record<string, unknown>;
      return body.status === 'connected' ? body : undefined;
    }, { what: 'the device shown connected' });
    expect(view).toMatchObject({ status_changed_at: seenAt.toISOString(), last_seen_at: seenAt.toISOString() });
    const listed = (ok(await call('registry.device.list', admin)).body as { devices: Record<string, unknown>[] }).devices.find((d) => d.device_id === id);
    expect(listed).toMatchObject({ status: 'connected' });
    const offlineAt = new Date(seenAt.getTime() + 1000);
    report(id, 'offline', offlineAt);
    await waitFor(async () => (ok(await call('registry.device.connectivity', undefined, { body: { device_id: id } })).body as { status: string }).status === 'disconnected', {
      what: 'the offline heard',
    });
  });

  it('a device removed and provisioned again under its id does not inherit what was heard of its predecessor', async () => {
    const id = randomDeviceId();
    expect(ok((await provision(admin, { product: 'meter' }, id)).reply).status).toBe(201);
    report(id, 'seen', new Date());
    await waitFor(async () => (ok(await call('registry.device.get', admin, { params: { device_id: id } })).body as { status: string }).status === 'connected', {
      what: 'the first device shown connected',
    });
    expect(ok(await call('registry.device.remove', admin, { params: { device_id: id }, query: { confirm: id } })).status).toBe(204);
    expect(ok((await provision(admin, { product: 'meter' }, id)).reply).status).toBe(201);

    const fresh = { status: 'disconnected', status_changed_at: null, last_seen_at: null };
    expect(ok(await call('registry.device.get', admin, { params: { device_id: id } })).body).toMatchObject(fresh);
    expect((ok(await call('registry.device.list', admin)).body as { devices: Record<string, unknown>[] }).devices.find((d) => d.device_id === id)).toMatchObject(fresh);
    expect(ok(await call('registry.device.health', admin, { params: { device_id: id } })).body).toMatchObject(fresh);
    expect(ok(await call('registry.device.connectivity', undefined, { body: { device_id: id, wait_for_connected_ms: 200 } })).body).toEqual(fresh);

    // Its own first message connects it, dated by itself alone.
    const seenAt = new Date();
    report(id, 'seen', seenAt);
    const own = await waitFor(async () => {
      const body = ok(await call('registry.device.connectivity', undefined, { body: { device_id: id } })).body as Record<string, unknown>;
      return body.status === 'connected' ? body : undefined;
    }, { what: 'the new device connected' });
    expect(own).toEqual({ status: 'connected', status_changed_at: seenAt.toISOString(), last_seen_at: seenAt.toISOString() });
  });

  it('waits up to wait_for_connected_ms for a report of a device that is not connected, and no longer', async () => {
    const { id } = await provision(admin, {});
    let started = Date.now();
    const silent = ok(await call('registry.device.connectivity', undefined, { body: { device_id: id, wait_for_connected_ms: 300 } })).body;
    expect(silent).toMatchObject({ status: 'disconnected' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);

    started = Date.now();
    const asked = call('registry.device.connectivity', undefined, { body: { device_id: id, wait_for_connected_ms: 2000 } });
    setTimeout(() => report(id, 'seen', new Date()), 100);
    expect(ok(await asked).body).toMatchObject({ status: 'connected' });
    expect(Date.now() - started).toBeLessThan(1500);
    expect(err(await raw('registry.device.connectivity', { body: { device_id: id, wait_for_connected_ms: 2001 } })).status).toBe(400);
  });
});

describe('describing devices for other services', () => {
  it('answers the known devices in id order with org node and automation, leaving unknown ids out', async () => {
    const { id: lightId } = await provision(admin, { name: 'Hall' });
    const { id: meterId } = await provision(admin, { product: 'meter' });
    expect(ok(await call('registry.device.automation', admin, { params: { device_id: lightId }, body: { enabled: false } })).status).toBe(200);
    const { devices } = ok(await call('registry.device.lookup', undefined, { body: { device_ids: [meterId, lightId, randomDeviceId()] } })).body as { devices: Array<Record<string, unknown>> };
    const expected = [
      { device_id: lightId, product: 'light', name: 'Hall', org_node: { id: 1, parent_id: null, name: expect.any(String) }, automation_enabled: false },
      { device_id: meterId, product: 'meter', name: null, org_node: { id: 1, parent_id: null, name: expect.any(String) }, automation_enabled: false },
    ].sort((a, b) => (a.device_id < b.device_id ? -1 : 1));
    expect(devices).toEqual(expected);
    expect(err(await raw('registry.device.lookup', { body: { device_ids: [] } })).status).toBe(400);
  });
});

describe('sealing secret settings', () => {
  it('seals with the device settings key derived at provisioning, bound to device and key', async () => {
    const { id } = await provision(admin, { credential_source: 'root_secret', root_secret: 'Rt0!secret#Key42' });
    const sealed = ok(await call('registry.settings.seal', undefined, { body: { device_id: id, key: 'mqttPass', value: 'hunter2' } })).body as { value: string };
    expect(sealed.value).toMatch(/^enc1:[A-Za-z0-9_-]+$/);
    const key = deriveSettingsKey('Rt0!secret#Key42', id, 'light');
    expect(openSetting(key, id, 'mqttPass', sealed.value)).toBe('hunter2');
    expect(() => openSetting(key, id, 'otherPass', sealed.value)).toThrow();
    expect(err(await call('registry.settings.seal', undefined, { body: { device_id: randomDeviceId(), key: 'k', value: 'v' } })).status).toBe(404);
    expect(err(await raw('registry.settings.seal', { body: { device_id: id, key: 'a|b', value: 'v' } }))).toMatchObject({ status: 400, code: 'validation_error' });
    expect(err(await raw('registry.settings.seal', { body: { device_id: id, key: 'k' } })).status).toBe(400);
  });
});

describe('removal', () => {
  it('needs confirm equal to the device id, as query or body', async () => {
    const { id } = await provision(admin, {});
    for (const parts of [{}, { query: { confirm: 'nope' } }, { body: { confirm: id.toLowerCase() } }]) {
      expect(err(await call('registry.device.remove', admin, { params: { device_id: id }, ...parts }))).toMatchObject({ status: 409, code: 'confirmation_required' });
    }
    expect(await testDb.db.device.findUnique({ where: { deviceId: id } })).not.toBeNull();
    expect(ok(await call('registry.device.remove', admin, { params: { device_id: id }, query: { confirm: id } })).status).toBe(204);
    const other = (await provision(admin, {})).id;
    expect(ok(await call('registry.device.remove', admin, { params: { device_id: other }, body: { confirm: other } })).status).toBe(204);
  });

  it('cuts the broker credential first; when that fails the record is kept; then the record and its telemetry go', async () => {
    const { id } = await provision(admin, {});
    await insertTelemetry(testDb.db, [{ deviceId: id, createdAt: new Date(), topic: `light/${id}/tele/heartbeat`, payload: '{}' }]);
    bridge.mode = 'refuse';
    try {
      expect(err(await call('registry.device.remove', admin, { params: { device_id: id }, query: { confirm: id } }))).toMatchObject({ status: 503, code: 'broker_unavailable' });
    } finally {
      bridge.mode = 'ok';
    }
    expect(await testDb.db.device.findUnique({ where: { deviceId: id } })).not.toBeNull();

    expect(ok(await call('registry.device.remove', admin, { params: { device_id: id }, query: { confirm: id } })).status).toBe(204);
    expect(bridge.deletes.at(-1)).toEqual({ device_id: id });
    expect(await testDb.db.device.findUnique({ where: { deviceId: id } })).toBeNull();
    expect(await testDb.db.telemetry.count({ where: { deviceId: id } })).toBe(0);
    expect(err(await call('registry.device.get', admin, { params: { device_id: id } })).status).toBe(404);
    await waitFor(() => events.some((e) => e.device_id === id && e.change === 'removed'), { what: 'removed event' });
  });

  it('an org-scoped partner cannot remove a device outside its scope', async () => {
    const { id } = await provision(admin, {});
    expect(err(await call('registry.device.remove', principal({ org_grants: [org.north] }), { params: { device_id: id }, query: { confirm: id } })).status).toBe(404);
  });
});

describe('partner events', () => {
  const ofDevice = (id: string) => partnerEvents.filter((m) => m.event.device_id === id);

  it('provisioning, a move and a removal each publish one event with the org nodes it concerns', async () => {
    const { id, reply } = await provision(admin, { name: 'Porch', org: 'Other' });
    expect(ok(reply).status).toBe(201);
    await waitFor(() => ofDevice(id).length === 1, { what: 'device.provisioned' });
    expect(ofDevice(id)[0]).toMatchObject({ event: { type: 'device.provisioned', version: 1, device_id: id, data: { product: 'light', name: 'Porch', org_node_id: org.other } }, org_node_ids: [org.other] });

    expect(ok(await call('registry.device.move', admin, { params: { device_id: id }, body: { org_node_id: org.depot } })).status).toBe(204);
    // A rename is not a partner event.
    expect(ok(await call('registry.device.rename', admin, { params: { device_id: id }, body: { name: 'Back porch' } })).status).toBe(204);
    expect(ok(await call('registry.device.remove', admin, { params: { device_id: id }, query: { confirm: id } })).status).toBe(204);
    await waitFor(() => ofDevice(id).length === 3, { what: 'moved and removed' });
    expect(ofDevice(id).map((m) => [m.event.type, m.event.data, m.org_node_ids])).toEqual([
      ['device.provisioned', { product: 'light', name: 'Porch', org_node_id: org.other }, [org.other]],
      ['device.moved', { from_org_node_id: org.other, to_org_node_id: org.depot }, [org.other, org.depot]],
      ['device.removed', { product: 'light', org_node_id: org.depot }, [org.depot]],
    ]);
    expect(new Set(ofDevice(id).map((m) => m.event.id)).size).toBe(3);
  });

  it('a refused change publishes nothing', async () => {
    const { id } = await provision(admin, {});
    await waitFor(() => ofDevice(id).length === 1, { what: 'device.provisioned' });
    bridge.mode = 'refuse';
    try {
      expect(err(await call('registry.device.remove', admin, { params: { device_id: id }, query: { confirm: id } })).status).toBe(503);
    } finally {
      bridge.mode = 'ok';
    }
    expect(err(await call('registry.device.move', principal({ org_grants: [org.north] }), { params: { device_id: id }, body: { org_node_id: org.north } })).status).toBe(404);
    // The next change's event follows the provisioning directly.
    expect(ok(await call('registry.device.remove', admin, { params: { device_id: id }, query: { confirm: id } })).status).toBe(204);
    await waitFor(() => ofDevice(id).length === 2, { what: 'device.removed' });
    expect(ofDevice(id).map((m) => m.event.type)).toEqual(['device.provisioned', 'device.removed']);
  });

  it('answers each node’s path from its root (registry.org.paths)', async () => {
    const reply = ok(await bus.request('registry.org.paths', { request_id: uniqueId('req'), params: {}, query: {}, body: { org_node_ids: [org.depot, org.acme, 999_999] } }));
    expect(reply.body).toEqual({ paths: [{ org_node_id: org.depot, path: [org.acme, org.north, org.depot] }, { org_node_id: org.acme, path: [org.acme] }] });
  });
});
