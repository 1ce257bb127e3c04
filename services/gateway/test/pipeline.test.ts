import http from 'node:http';
import { gunzipSync } from 'node:zlib';
import { ConflictError, JsonBody, NotFoundError, metricsRegistry } from '@fleet/service-kit';
import { randomDeviceId, testSubject, uniqueId, waitFor } from '@fleet/test-kit';
import type { DeviceSummary, RequestEnvelope } from '@fleet/contracts';
import { routes as realRoutes } from '../src/routes/table';
import { routeId, type RouteDef } from '../src/routes/types';
import { IdempotencyStore } from '../src/idempotency';
import { COMPRESS_FROM_BYTES } from '../src/http/answer-encoding';
import { call, startTestGateway, type TestGateway } from './support/harness';

// Synthetic rows exercise every pipeline behaviour the domain routes will rely on; their
// owners are real NATS responders registered by this file.
const run = uniqueId('p');
const subject = (name: string) => testSubject(`test.${run}.${name}`);
const ok = { 200: { description: 'ok' } };
const testRoutes: RouteDef[] = [
  ...realRoutes.filter((r) => r.path === '/v1/account'),
  {
    method: 'POST', path: '/v1/things/{thing_id}', operationId: 'createThing', tag: 'Test', summary: 'create',
    permission: 'raw_commands', target: { subject: subject('thing.create') }, idempotent: true,
    params: { thing_id: { type: 'string', pattern: '^[a-z]+$' } },
    body: { type: 'object', required: ['name'], additionalProperties: false, properties: { name: { type: 'string', minLength: 1 }, count: { type: 'integer', minimum: 1, maximum: 10 } } },
    responses: { 201: { description: 'created' } },
  },
  {
    method: 'POST', path: '/v1/devices/{device_id}/pokes', operationId: 'poke', tag: 'Test', summary: 'poke',
    permission: 'raw_commands', target: { subject: subject('poke') }, device: { product: 'light' }, idempotent: true, limits: ['device_command'],
    body: { type: 'object', properties: { n: { type: 'integer' } } }, bodyOptional: true, responses: { 202: { description: 'accepted' } },
  },
  {
    method: 'PATCH', path: '/v1/devices/{device_id}/label', operationId: 'label', tag: 'Test', summary: 'label',
    permission: 'config_write', target: { subject: subject('label') }, device: {}, limits: ['config_mutation'],
    body: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } }, responses: { 204: { description: 'done' } },
  },
  {
    method: 'GET', path: '/v1/devices/{device_id}/peek', operationId: 'peek', tag: 'Test', summary: 'peek',
    permission: null, target: { subject: subject('peek') }, device: { ownerResolves: true }, responses: ok,
  },
  {
    method: 'DELETE', path: '/v1/devices/{device_id}', operationId: 'remove', tag: 'Test', summary: 'remove',
    permission: 'device_removal', target: { subject: subject('remove') }, device: {}, limits: ['destructive'],
    query: { properties: { confirm: { type: 'string' } } }, body: { type: 'object', properties: { confirm: { type: 'string' } } }, bodyOptional: true,
    responses: { 204: { description: 'removed' } },
  },
  { method: 'GET', path: '/v1/search', operationId: 'search', tag: 'Test', summary: 'search', permission: null, target: { subject: subject('search') },
    query: { properties: { limit: { type: 'integer', minimum: 1, maximum: 1000 } } }, responses: ok },
  { method: 'GET', path: '/v1/pages', operationId: 'page', tag: 'Test', summary: 'page', permission: null, target: { subject: subject('page') }, responses: ok },
  { method: 'GET', path: '/v1/lists', operationId: 'list', tag: 'Test', summary: 'list', permission: null, target: { subject: subject('list') }, responses: ok },
  {
    method: 'POST', path: '/v1/stamps', operationId: 'stamp', tag: 'Test', summary: 'stamp', permission: null, target: { subject: subject('stamp') }, idempotent: true,
    body: { type: 'object' }, bodyOptional: true, responses: { 201: { description: 'stamped' } },
  },
  { method: 'GET', path: '/v1/slow', operationId: 'slow', tag: 'Test', summary: 'slow', permission: null, target: { subject: subject('slow') }, responses: ok },
  { method: 'GET', path: '/v1/nobody', operationId: 'nobody', tag: 'Test', summary: 'nobody', permission: null, target: { subject: subject('nobody') }, responses: ok },
  { method: 'GET', path: '/v1/boom', operationId: 'boom', tag: 'Test', summary: 'boom', permission: null, target: { subject: subject('boom') }, responses: ok },
];

/** A page its owner writes as JSON text (JsonBody): relayed to the partner byte for byte. */
const PAGE = { records: Array.from({ length: 500 }, (_, k) => ({ seq: k, label: `r\u00e9cord "${k}" ✓`, at: null, ok: k % 2 === 0 })), has_more: true };

/** A GET with exactly these headers (fetch would add its own Accept-Encoding), the answer's bytes as sent. */
function getRaw(url: string, headers: Record<string, string>): Promise<{ status: number; headers: http.IncomingHttpHeaders; raw: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, raw: Buffer.concat(chunks) }));
      })
      .on('error', reject);
  });
}

let gw: TestGateway;
const calls: Record<string, RequestEnvelope[]> = {};
const devices = new Map<string, DeviceSummary>();
let failNextCreate = false;
/** A Redis key the next create overwrites with a string, so keeping its answer fails (WRONGTYPE). */
let spoilRecordOnCreate: string | undefined;
let createDelayMs = 0;

beforeAll(async () => {
  gw = await startTestGateway(testRoutes, { CONFIG_MUTATIONS_PER_MIN: '2', DESTRUCTIVE_PER_HOUR: '1', DEVICE_COMMAND_CEILING_PER_MIN: '3' });
  const record = (name: string, req: RequestEnvelope) => (calls[name] ??= []).push(req);
  gw.bus.serve('registry.scope.resolve', async (req) => {
    record('resolve', req);
    const device = devices.get(req.params.device_id ?? '');
    const principal = req.principal;
    const visible = device && principal && (principal.permissions.includes('access_all_devices') || principal.org_grants.includes(device.org_node_id ?? -1));
    if (!visible) throw new NotFoundError('Device not found.');
    return { body: device };
  });
  gw.bus.serve(subject('thing.create'), async (req) => {
    record('create', req);
    if (createDelayMs) await new Promise((r) => setTimeout(r, createDelayMs));
    if (spoilRecordOnCreate) {
      await gw.redis.set(spoilRecordOnCreate, 'not an idempotency record');
      spoilRecordOnCreate = undefined;
    }
    if (failNextCreate) {
      failNextCreate = false;
      throw new ConflictError('try later');
    }
    return { status: 201, headers: { Location: `/v1/things/${req.params.thing_id}` }, body: { id: req.params.thing_id, n: (calls.create ?? []).length } };
  });
  gw.bus.serve(subject('poke'), async (req) => {
    record('poke', req);
    // `{"known": true}`: a request the owner recognises as one already made (as system-files does a file push's key after 24 hours).
    if ((req.body as { known?: boolean } | undefined)?.known) return { status: 200, body: { device: req.device?.device_id, n: (calls.poke ?? []).length }, unspent: true as const };
    // `{"slow": true}`: the command goes out, but the answer comes after the caller stopped waiting.
    if ((req.body as { slow?: boolean } | undefined)?.slow) await new Promise((resolve) => setTimeout(resolve, 2500));
    return { status: 202, body: { device: req.device?.device_id, n: (calls.poke ?? []).length } };
  });
  gw.bus.serve(subject('label'), async (req) => (record('label', req), { status: 204 }));
  gw.bus.serve(subject('peek'), async (req) => {
    record('peek', req);
    if (req.params.device_id !== 'ABCDEF012345') throw new NotFoundError('Device not found.');
    return { body: { device_id: req.params.device_id } };
  });
  gw.bus.serve(subject('remove'), async (req) => {
    record('remove', req);
    const confirm = ((req.query as { confirm?: string }).confirm) ?? ((req.body as { confirm?: string } | undefined)?.confirm);
    if (confirm !== req.params.device_id) throw new ConflictError('Confirm with the device id.', 'confirmation_required');
    return { status: 204 };
  });
  gw.bus.serve(subject('search'), async (req) => ({ body: { query: req.query } }));
  gw.bus.serve(subject('page'), async () => ({ headers: { 'Cache-Control': 'no-store' }, body: JsonBody.of(PAGE) }));
  gw.bus.serve(subject('list'), async () => ({ body: PAGE }));
  gw.bus.serve(subject('stamp'), async (req) => (record('stamp', req), { status: 201, body: JsonBody.of({ n: (calls.stamp ?? []).length, note: 'é "q"' }) }));
  gw.bus.serve(subject('slow'), () => new Promise((resolve) => setTimeout(() => resolve({ body: {} }), 2500)));
  gw.bus.serve(subject('boom'), async () => {
    throw new Error('connection to db-internal-7 failed: password authentication failed for user "svc"');
  });
  await gw.bus.connection.flush();
});

afterAll(async () => {
  await gw.close();
});

const light = (org: number): string => {
  const id = randomDeviceId();
  devices.set(id, { device_id: id, product: 'light', org_node_id: org, name: null });
  return id;
};

describe('bodies the owning service wrote as JSON text', () => {
  it('writes them to the partner as they are, as JSON with the owner’s headers', async () => {
    const p = await gw.partner(['--permissions', 'state_read']);
    const res = await fetch(`${gw.url}/v1/pages`, { headers: { Authorization: `Bearer ${p.key}`, 'Accept-Encoding': 'identity' } });
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('content-encoding')).toBeNull();
    expect(res.headers.get('vary')).toBe('Accept-Encoding');
    expect(Number(res.headers.get('content-length'))).toBe(Buffer.byteLength(text));
    expect(text).toBe(JSON.stringify(PAGE));
  });

  it.each([
    ['gzip', 'gzip'],
    ['gzip, deflate, br', 'gzip'],
    ['br;q=1, gzip;q=0.5', 'gzip'],
    ['gzip;q=0', null],
    ['gzip;q=0.5, identity', null],
    [undefined, null],
  ])('sends a large answer gzip-compressed only when the client prefers gzip (Accept-Encoding %s)', async (accept, encoding) => {
    const p = await gw.partner(['--permissions', 'state_read']);
    const { status, headers, raw } = await getRaw(`${gw.url}/v1/pages`, { authorization: `Bearer ${p.key}`, ...(accept === undefined ? {} : { 'accept-encoding': accept }) });
    expect(status).toBe(200);
    expect(headers['content-encoding']).toBe(encoding ?? undefined);
    expect(headers.vary).toBe('Accept-Encoding');
    expect(headers['cache-control']).toBe('no-store');
    expect(Number(headers['content-length'])).toBe(raw.byteLength);
    const text = (encoding === 'gzip' ? gunzipSync(raw) : raw).toString('utf8');
    expect(text).toBe(JSON.stringify(PAGE));
    if (encoding === 'gzip') expect(raw.byteLength).toBeLessThan(Buffer.byteLength(text) / 4);
  });

  it('compresses a large answer the owning service sent as a value too', async () => {
    const p = await gw.partner(['--permissions', 'state_read']);
    const { status, headers, raw } = await getRaw(`${gw.url}/v1/lists`, { authorization: `Bearer ${p.key}`, 'accept-encoding': 'gzip' });
    expect(status).toBe(200);
    expect(headers['content-encoding']).toBe('gzip');
    expect(headers['content-type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(gunzipSync(raw).toString('utf8'))).toEqual(PAGE);
  });

  it('sends a small answer as it is, whatever the client accepts, without Vary', async () => {
    const p = await gw.partner(['--permissions', 'state_read']);
    const { status, headers, raw } = await getRaw(`${gw.url}/v1/account`, { authorization: `Bearer ${p.key}`, 'accept-encoding': 'gzip' });
    expect(status).toBe(200);
    expect(raw.byteLength).toBeLessThan(COMPRESS_FROM_BYTES);
    expect(headers['content-encoding']).toBeUndefined();
    expect(headers.vary).toBeUndefined();
    expect(JSON.parse(raw.toString('utf8'))).toMatchObject({ partner: expect.any(Object) });
  });

  it('keeps such an answer for an Idempotency-Key and replays the same body', async () => {
    const p = await gw.partner(['--permissions', 'state_read']);
    const headers = { 'Idempotency-Key': `k-${uniqueId()}` };
    const first = await call(gw.url, 'POST', '/v1/stamps', { key: p.key, body: {}, headers });
    const again = await call(gw.url, 'POST', '/v1/stamps', { key: p.key, body: {}, headers });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ n: expect.any(Number), note: 'é "q"' });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
  });
});

describe('permissions', () => {
  it('refuses a missing permission with 403 naming it, before looking at the body', async () => {
    const p = await gw.partner(['--permissions', 'state_read']);
    const res = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: 'not json at all', headers: { 'Content-Type': 'text/plain' } });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: expect.any(String), code: 'forbidden', request_id: res.headers.get('x-request-id'), required_permission: 'raw_commands' });
  });

  it('does not let one permission imply another', async () => {
    const p = await gw.partner(['--permissions', 'system_destructive,access_all_devices,relaxed_caps']);
    const res = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'x' } });
    expect(res.status).toBe(403);
    expect(res.body.required_permission).toBe('raw_commands');
  });
});

describe('bodies and validation', () => {
  let key: string;
  beforeAll(async () => {
    key = (await gw.partner(['--permissions', 'raw_commands'])).key;
  });

  it('answers 415 for a body that is not application/json', async () => {
    const res = await call(gw.url, 'POST', '/v1/things/abc', { key, body: 'name=x', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
    expect(res.status).toBe(415);
    expect(res.body.code).toBe('unsupported_media_type');
  });

  it.each([
    ['invalid JSON', '{"name":'],
    ['an array', '[1,2]'],
    ['a string', '"name"'],
    ['null', 'null'],
  ])('answers 400 validation_error for %s', async (_what, raw) => {
    const res = await call(gw.url, 'POST', '/v1/things/abc', { key, body: raw });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_error');
  });

  it('requires a body where the route needs one', async () => {
    const res = await call(gw.url, 'POST', '/v1/things/abc', { key });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/body is required/);
  });

  it('names the offending field, parameter or unknown query parameter', async () => {
    expect((await call(gw.url, 'POST', '/v1/things/abc', { key, body: { name: 'x', count: 11 } })).body.error).toMatch(/'count'/);
    expect((await call(gw.url, 'POST', '/v1/things/abc', { key, body: {} })).body.error).toMatch(/'name'/);
    expect((await call(gw.url, 'POST', '/v1/things/abc', { key, body: { name: 'x', extra: 1 } })).body.error).toMatch(/'extra'/);
    expect((await call(gw.url, 'POST', '/v1/things/ABC', { key, body: { name: 'x' } })).body.error).toMatch(/thing_id/);
    const query = await call(gw.url, 'GET', '/v1/search?limit=0', { key });
    expect([query.status, query.body.error]).toEqual([400, expect.stringMatching(/'limit'/)]);
    const unknown = await call(gw.url, 'GET', '/v1/search?lmit=5', { key });
    expect([unknown.status, unknown.body.error]).toEqual([400, "unknown query parameter 'lmit'"]);
  });

  it('passes coerced query values to the owning service', async () => {
    const res = await call(gw.url, 'GET', '/v1/search?limit=25', { key });
    expect(res.body).toEqual({ query: { limit: 25 } });
  });
});

describe('idempotency', () => {
  let p: { key: string; id: string };
  beforeAll(async () => {
    p = await gw.partner(['--permissions', 'raw_commands']);
  });

  it('replays the first answer with Idempotent-Replayed and does not redo the work', async () => {
    const headers = { 'Idempotency-Key': `k-${uniqueId()}` };
    const first = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'x', count: 2 }, headers });
    const before = calls.create?.length;
    // Same request with keys in another order is the same request.
    const again = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: '{"count":2,"name":"x"}', headers });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('location')).toBe('/v1/things/abc');
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(again.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));
    expect(calls.create?.length).toBe(before);
  });

  it('answers what the request did when its answer cannot be kept for replay', async () => {
    const key = `k-${uniqueId()}`;
    const store = new IdempotencyStore(gw.redis, { keyPrefix: `${gw.unique}:idem:` });
    const route = testRoutes.find((r) => r.operationId === 'createThing')!;
    spoilRecordOnCreate = store.redisKey(`${p.id}:${routeId(route)}`, key);
    const first = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'kept?' }, headers: { 'Idempotency-Key': key } });
    expect(spoilRecordOnCreate).toBeUndefined();
    // The thing was created: the partner learns so, rather than a 503 inviting a second create.
    expect([first.status, first.body.id, first.headers.get('location')]).toEqual([201, 'abc', '/v1/things/abc']);
  });

  it('answers 422 for the same key with a different request', async () => {
    const headers = { 'Idempotency-Key': `k-${uniqueId()}` };
    await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'x' }, headers });
    const other = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'y' }, headers });
    expect([other.status, other.body.code]).toEqual([422, 'idempotency_key_reused']);
  });

  it('answers 409 with Retry-After while the first request still runs', async () => {
    const headers = { 'Idempotency-Key': `k-${uniqueId()}` };
    createDelayMs = 400;
    const first = call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'slow' }, headers });
    await new Promise((r) => setTimeout(r, 100));
    const second = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'slow' }, headers });
    createDelayMs = 0;
    expect([second.status, second.body.code]).toEqual([409, 'idempotency_in_progress']);
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await first).status).toBe(201);
  });

  it('keeps only 2xx answers: after a failure the same key runs again', async () => {
    const headers = { 'Idempotency-Key': `k-${uniqueId()}` };
    failNextCreate = true;
    const failed = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'x' }, headers });
    expect(failed.status).toBe(409);
    const retried = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'x' }, headers });
    expect(retried.status).toBe(201);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
  });

  it('scopes keys per partner and per route', async () => {
    const other = await gw.partner(['--permissions', 'raw_commands']);
    const key = `k-${uniqueId()}`;
    const mine = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'x' }, headers: { 'Idempotency-Key': key } });
    const theirs = await call(gw.url, 'POST', '/v1/things/abc', { key: other.key, body: { name: 'x' }, headers: { 'Idempotency-Key': key } });
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(theirs.body.n).not.toBe(mine.body.n);
  });

  it('does not re-check a replay against current permissions', async () => {
    const q = await gw.partner(['--permissions', 'raw_commands']);
    const headers = { 'Idempotency-Key': `k-${uniqueId()}` };
    const first = await call(gw.url, 'POST', '/v1/things/abc', { key: q.key, body: { name: 'x' }, headers });
    await gw.admin('partner', 'update', '--id', q.id, '--permissions', 'state_read');
    const replay = await call(gw.url, 'POST', '/v1/things/abc', { key: q.key, body: { name: 'x' }, headers });
    expect([replay.status, replay.body]).toEqual([201, first.body]);
    const fresh = await call(gw.url, 'POST', '/v1/things/abc', { key: q.key, body: { name: 'x' }, headers: { 'Idempotency-Key': `k-${uniqueId()}` } });
    expect(fresh.status).toBe(403);
  });

  it('checks the permission before the key: 403, not a refusal of the key, for a request that is no replay', async () => {
    const q = await gw.partner(['--permissions', 'raw_commands']);
    const headers = { 'Idempotency-Key': `k-${uniqueId()}` };
    expect((await call(gw.url, 'POST', '/v1/things/abc', { key: q.key, body: { name: 'x' }, headers })).status).toBe(201);
    await gw.admin('partner', 'update', '--id', q.id, '--permissions', 'state_read');
    const reused = await call(gw.url, 'POST', '/v1/things/abc', { key: q.key, body: { name: 'y' }, headers });
    expect([reused.status, reused.body.required_permission]).toEqual([403, 'raw_commands']);
    const malformed = await call(gw.url, 'POST', '/v1/things/abc', { key: q.key, body: { name: 'x' }, headers: { 'Idempotency-Key': 'has space' } });
    expect([malformed.status, malformed.body.required_permission]).toEqual([403, 'raw_commands']);
    // A replay of the first request still answers as it did.
    expect((await call(gw.url, 'POST', '/v1/things/abc', { key: q.key, body: { name: 'x' }, headers })).status).toBe(201);
  });

  it('refuses a malformed Idempotency-Key with 400', async () => {
    for (const bad of ['has space', 'x'.repeat(256), 'tab\there']) {
      const res = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'x' }, headers: { 'Idempotency-Key': bad } });
      expect([res.status, res.body.code]).toEqual([400, 'validation_error']);
    }
    const longest = await call(gw.url, 'POST', '/v1/things/abc', { key: p.key, body: { name: 'x' }, headers: { 'Idempotency-Key': '~'.repeat(255) } });
    expect(longest.status).toBe(201);
  });

  it('counts a replay toward the request limit but not the device command limit', async () => {
    const q = await gw.partner(['--permissions', 'raw_commands', '--grant', '77', '--device-commands-per-min', '1', '--requests-per-min', '3']);
    const device = light(77);
    const headers = { 'Idempotency-Key': `k-${uniqueId()}` };
    const first = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, headers });
    const replay = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, headers });
    expect([first.status, replay.status]).toEqual([202, 202]);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('ratelimit-remaining')).toBe('1');
    const third = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, headers });
    expect(third.status).toBe(202);
    const fourth = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, headers });
    expect([fourth.status, fourth.body.code, fourth.headers.get('ratelimit-remaining')]).toEqual([429, 'rate_limited', '0']);
  });
});

describe('a request its owner recognised as already made', () => {
  it('gives back what it spent from the route’s limits', async () => {
    const q = await gw.partner(['--permissions', 'raw_commands', '--grant', '79', '--device-commands-per-min', '1']);
    const device = light(79);
    for (let k = 0; k < 3; k += 1) expect((await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, body: { known: true } })).status).toBe(200);
    expect((await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key })).status).toBe(202);
    expect((await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key })).body.code).toBe('rate_limited');
  });

  it('does not keep that answer for its Idempotency-Key: each retry reads the current state again', async () => {
    const q = await gw.partner(['--permissions', 'raw_commands', '--grant', '76']);
    const device = light(76);
    const headers = { 'Idempotency-Key': `late-${uniqueId()}` };
    const first = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, headers, body: { known: true } });
    const second = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, headers, body: { known: true } });
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(second.body.n).toBe(Number(first.body.n) + 1);
  });
});

describe('the idempotency fingerprint', () => {
  it('takes a retry with `{}` as the same request as one sent without a body', async () => {
    const q = await gw.partner(['--permissions', 'raw_commands', '--grant', '75']);
    const device = light(75);
    const headers = { 'Idempotency-Key': `empty-${uniqueId()}` };
    const first = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, headers });
    const again = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, headers, body: {} });
    expect([first.status, again.status, again.headers.get('idempotent-replayed')]).toEqual([202, 202, 'true']);
    expect(again.body).toEqual(first.body);
  });
});

describe('idempotency claim and request window in one round trip', () => {
  it('answers 429 for a keyed request the full window refuses, and leaves its key unclaimed', async () => {
    const q = await gw.partner(['--permissions', 'raw_commands', '--grant', '78', '--requests-per-min', '1']);
    const device = light(78);
    expect((await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, headers: { 'Idempotency-Key': `k-${uniqueId()}` } })).status).toBe(202);
    const key = `k-${uniqueId()}`;
    const refused = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, headers: { 'Idempotency-Key': key } });
    expect([refused.status, refused.body.code]).toEqual([429, 'rate_limited']);
    const store = new IdempotencyStore(gw.redis, { keyPrefix: `${gw.unique}:idem:` });
    const claimed = store.redisKey(`${q.id}:${routeId({ method: 'POST', path: '/v1/devices/{device_id}/pokes' })}`, key);
    expect(await gw.redis.exists(claimed)).toBe(0);
    // An invalid key is refused as 429 too once the window is full (the window comes first).
    const invalid = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key, headers: { 'Idempotency-Key': 'has space' } });
    expect(invalid.status).toBe(429);
  });
});

describe('device scope', () => {
  it('answers 404 alike for out-of-scope and nonexistent devices, and never names a permission', async () => {
    const p = await gw.partner(['--permissions', 'raw_commands', '--grant', '10']);
    const foreign = light(11);
    const missing = randomDeviceId();
    const a = await call(gw.url, 'POST', `/v1/devices/${foreign}/pokes`, { key: p.key });
    const b = await call(gw.url, 'POST', `/v1/devices/${missing}/pokes`, { key: p.key });
    expect([a.status, b.status]).toEqual([404, 404]);
    expect(a.body.code).toBe('not_found');
    expect(a.body.error).toBe(b.body.error);
    expect(a.body.required_permission).toBeUndefined();
  });

  it('sends the resolved device to the owning service', async () => {
    const p = await gw.partner(['--permissions', 'raw_commands', '--grant', '12']);
    const device = light(12);
    const res = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: p.key, body: { n: 1 } });
    expect([res.status, res.body.device]).toEqual([202, device]);
    const envelope = calls.poke?.at(-1);
    expect(envelope?.device).toEqual(devices.get(device));
    expect(envelope?.principal?.partner_id).toBe(p.id);
    expect(envelope?.body).toEqual({ n: 1 });
  });

  it('asks the owner alone where the owner resolves the device itself', async () => {
    const p = await gw.partner(['--permissions', 'raw_commands', '--grant', '12']);
    const resolvedBefore = (calls.resolve ?? []).length;
    const found = await call(gw.url, 'GET', '/v1/devices/ABCDEF012345/peek', { key: p.key });
    const missing = await call(gw.url, 'GET', `/v1/devices/${randomDeviceId()}/peek`, { key: p.key });
    expect([found.status, found.body]).toEqual([200, { device_id: 'ABCDEF012345' }]);
    expect([missing.status, missing.body.code]).toEqual([404, 'not_found']);
    expect((calls.resolve ?? []).length).toBe(resolvedBefore);
    expect(calls.peek?.map((e) => [e.params.device_id !== undefined, e.device])).toEqual([
      [true, undefined],
      [true, undefined],
    ]);
    // A malformed id is 404 as on every device route: no device has it.
    const malformed = await call(gw.url, 'GET', '/v1/devices/nope/peek', { key: p.key });
    expect([malformed.status, malformed.body.code]).toEqual([404, 'not_found']);
    expect((calls.resolve ?? []).length).toBe(resolvedBefore);
  });

  it('treats a device of another product as not found on product routes', async () => {
    const p = await gw.partner(['--permissions', 'raw_commands', '--access-all-devices']);
    const id = randomDeviceId();
    devices.set(id, { device_id: id, product: 'meter', org_node_id: 1, name: null });
    expect((await call(gw.url, 'POST', `/v1/devices/${id}/pokes`, { key: p.key })).status).toBe(404);
  });
});

describe('request window and limit classes in one round trip', () => {
  it('counts a request refused before its limits (400, 403, 404) in the request window, and answers 429 ahead of the refusal once the window is full', async () => {
    const p = await gw.partner(['--permissions', 'raw_commands', '--grant', '30', '--requests-per-min', '3']);
    const device = light(30);
    const invalid = await call(gw.url, 'PATCH', `/v1/devices/${device}/label`, { key: p.key, body: { name: 'n' } });
    expect([invalid.status, invalid.headers.get('ratelimit-remaining')]).toEqual([403, '2']);
    const missing = await call(gw.url, 'POST', `/v1/devices/${randomDeviceId()}/pokes`, { key: p.key });
    expect([missing.status, missing.headers.get('ratelimit-remaining')]).toEqual([404, '1']);
    const sent = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: p.key });
    expect([sent.status, sent.headers.get('ratelimit-remaining')]).toEqual([202, '0']);
    // Full: the same refused requests are now 429, the window first, as the spec orders it.
    const again = await call(gw.url, 'PATCH', `/v1/devices/${device}/label`, { key: p.key, body: { name: 'n' } });
    expect([again.status, again.body.code, again.headers.get('ratelimit-remaining')]).toEqual([429, 'rate_limited', '0']);
    expect(Number(again.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('keeps the device command spent by a request whose outcome is unknown (no answer in time): the limit is never passed', async () => {
    const p = await gw.partner(['--permissions', 'raw_commands', '--grant', '32', '--device-commands-per-min', '1']);
    const device = light(32);
    const before = (calls.poke ?? []).length;
    const unknown = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: p.key, body: { slow: true } });
    expect([unknown.status, unknown.body.code]).toEqual([503, 'service_unavailable']);
    // The owner did take it: the command may have reached the device.
    expect((calls.poke ?? []).length).toBe(before + 1);
    const next = await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: p.key });
    expect([next.status, next.body.code]).toEqual([429, 'rate_limited']);
  });

  it('does not spend the device command limit of a request the full request window refused', async () => {
    const p = await gw.partner(['--permissions', 'raw_commands', '--grant', '31', '--requests-per-min', '1', '--device-commands-per-min', '1']);
    const q = await gw.partner(['--permissions', 'raw_commands', '--grant', '31', '--device-commands-per-min', '5']);
    const device = light(31);
    expect((await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: p.key })).status).toBe(202);
    expect((await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: p.key })).status).toBe(429);
    // The shared ceiling (2 a minute here) counted only the admitted command: another partner gets the second.
    expect((await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: q.key })).status).toBe(202);
  });
});

describe('metrics', () => {
  /** A series' value by its labels (a histogram's count is its `<name>_count` series). */
  async function value(name: string, labels: Record<string, string>): Promise<number> {
    const family = name.replace(/_count$/, '');
    const metric = (await metricsRegistry.getMetricsAsJSON()).find((m) => m.name === family);
    const values = (metric?.values ?? []) as Array<{ value: number; labels: Record<string, unknown>; metricName?: string }>;
    return values.find((v) => (v.metricName ?? family) === name && Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;
  }

  it('counts answers by route template (never the path), method and status, and 429s by the limit that refused', async () => {
    const p = await gw.partner(['--permissions', 'raw_commands', '--grant', '21', '--device-commands-per-min', '1']);
    const device = light(21);
    const route = { route: '/v1/devices/{device_id}/pokes', method: 'POST' };
    const before = { accepted: await value('fleet_http_requests_total', { ...route, status: '202' }), refused: await value('fleet_http_limit_refusals_total', { limit: 'device_command' }) };
    const timedBefore = await value('fleet_http_request_duration_seconds_count', route);
    expect((await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: p.key })).status).toBe(202);
    expect((await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: p.key })).status).toBe(429);
    expect((await call(gw.url, 'GET', '/v1/no/such/route', { key: p.key })).status).toBe(404);
    // Counted when the answer is handed to the socket, which may be just after the client read it.
    await waitFor(async () => (await value('fleet_http_request_duration_seconds_count', route)) === timedBefore + 2, { what: 'both answers counted' });
    expect(await value('fleet_http_requests_total', { ...route, status: '202' })).toBe(before.accepted + 1);
    expect(await value('fleet_http_requests_total', { ...route, status: '429' })).toBeGreaterThanOrEqual(1);
    expect(await value('fleet_http_limit_refusals_total', { limit: 'device_command' })).toBe(before.refused + 1);
    expect(await value('fleet_http_request_duration_seconds_count', route)).toBe(timedBefore + 2);
    expect(await value('fleet_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' })).toBeGreaterThanOrEqual(1);
    const text = await metricsRegistry.metrics();
    expect(text).not.toContain(device);
  });
});

describe('limit classes', () => {
  it('holds per-device commands to the partner limit, then 429 with Retry-After', async () => {
    const p = await gw.partner(['--permissions', 'raw_commands', '--grant', '20', '--device-commands-per-min', '2']);
    const device = light(20);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push(await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: p.key }));
    expect(statuses.map((r) => r.status)).toEqual([202, 202, 429]);
    const refused = statuses[2]!;
    expect(refused.body.code).toBe('rate_limited');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // The partner's request window still admits requests: its headers are not zeroed.
    expect(Number(refused.headers.get('ratelimit-remaining'))).toBeGreaterThan(0);
    // Another device is a separate budget.
    expect((await call(gw.url, 'POST', `/v1/devices/${light(20)}/pokes`, { key: p.key })).status).toBe(202);
  });

  it('shares the global per-device ceiling across partners', async () => {
    const device = light(21);
    const a = await gw.partner(['--permissions', 'raw_commands', '--grant', '21']);
    const b = await gw.partner(['--permissions', 'raw_commands', '--grant', '21']);
    const results = [];
    for (const p of [a, a, b, b]) results.push((await call(gw.url, 'POST', `/v1/devices/${device}/pokes`, { key: p.key })).status);
    expect(results).toEqual([202, 202, 202, 429]);
  });

  it('throttles configuration mutations per partner', async () => {
    const p = await gw.partner(['--permissions', 'config_write', '--grant', '22']);
    const device = light(22);
    const results = [];
    for (let i = 0; i < 3; i++) results.push((await call(gw.url, 'PATCH', `/v1/devices/${device}/label`, { key: p.key, body: { name: 'n' } })).status);
    expect(results).toEqual([204, 204, 429]);
  });

  it('spends destructive operations from the hourly ceiling, but not ones the service refused', async () => {
    const p = await gw.partner(['--permissions', 'device_removal', '--grant', '23']);
    const [a, b] = [light(23), light(23)];
    const unconfirmed = await call(gw.url, 'DELETE', `/v1/devices/${a}?confirm=wrong`, { key: p.key });
    expect([unconfirmed.status, unconfirmed.body.code]).toEqual([409, 'confirmation_required']);
    const first = await call(gw.url, 'DELETE', `/v1/devices/${a}?confirm=${a}`, { key: p.key });
    const second = await call(gw.url, 'DELETE', `/v1/devices/${b}`, { key: p.key, body: { confirm: b } });
    expect([first.status, second.status]).toEqual([204, 429]);
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(60);
    expect(calls.remove?.at(-1)?.query).toEqual({ confirm: a });
  });
});

describe('owning service failures', () => {
  let key: string;
  beforeAll(async () => {
    key = (await gw.partner()).key;
  });

  it('answers 503 at once when no service answers the subject', async () => {
    const started = Date.now();
    const res = await call(gw.url, 'GET', '/v1/nobody', { key });
    expect([res.status, res.body.code]).toEqual([503, 'service_unavailable']);
    expect(res.headers.get('retry-after')).toBeTruthy();
    expect(Date.now() - started).toBeLessThan(500);
  });

  it('answers 503 within the bus timeout when the service is slow', async () => {
    const started = Date.now();
    const res = await call(gw.url, 'GET', '/v1/slow', { key });
    expect(res.status).toBe(503);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('answers 500 internal_error with no internals in the body', async () => {
    const res = await call(gw.url, 'GET', '/v1/boom', { key });
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: 'Internal error.', code: 'internal_error', request_id: res.headers.get('x-request-id') });
    expect(JSON.stringify(res.body)).not.toMatch(/db-internal|password|stack/);
  });
});
