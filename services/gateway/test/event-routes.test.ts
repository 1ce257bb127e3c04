/**
 * The webhook and event-stream rows of the route table with the events service stood in for on
 * NATS: what the gateway refuses itself (validation 400s, the permission 403 naming
 * `webhook_manage` or `events_read`) never reaches the owner; what passes is dispatched to its
 * subject with the principal, params, query, body and Idempotency-Key, and the owner's answer
 * (status, Location, errors) is relayed.
 */
import http from 'node:http';
import { PARTNER_EVENT_TYPES, type RequestEnvelope, type RequestSubject } from '@fleet/contracts';
import { ApiError, NotFoundError } from '@fleet/service-kit';
import { routes as realRoutes } from '../src/routes/table';
import { call, startTestGateway, type TestGateway } from './support/harness';

const eventRows = realRoutes.filter((r) => r.tag === 'Events');
const WH = `wh_${'0a'.repeat(16)}`;
const DLV = `dlv_${'1b'.repeat(16)}`;
const webhook = { id: WH, url: 'https://hooks.example.com/in', event_types: ['device.connected'], description: null, enabled: true, created_at: '2026-11-26T00:00:00.000Z', updated_at: '2026-11-26T00:00:00.000Z' };

let gw: TestGateway;
const reached: Array<{ subject: string; req: RequestEnvelope }> = [];
let refuseNext: ApiError | undefined;
let manager: { key: string };
let streamer: { key: string };

beforeAll(async () => {
  gw = await startTestGateway(eventRows);
  const owner = (subject: RequestSubject, answer: (req: RequestEnvelope) => { status?: number; headers?: Record<string, string>; body?: Record<string, unknown> }) =>
    gw.bus.serve(subject, async (req) => {
      reached.push({ subject, req });
      const refusal = refuseNext;
      refuseNext = undefined;
      if (refusal) throw refusal;
      return answer(req);
    });
  owner('events.webhook.create', () => ({ status: 201, headers: { Location: `/v1/webhooks/${WH}` }, body: { ...webhook, secret: 'whsec_c2VjcmV0' } }));
  owner('events.webhook.list', () => ({ body: { webhooks: [webhook] } }));
  owner('events.webhook.get', () => ({ body: webhook }));
  owner('events.webhook.update', (req) => ({ body: { ...webhook, ...req.body } }));
  owner('events.webhook.delete', () => ({ status: 204 }));
  owner('events.webhook.rotate', () => ({ body: { id: WH, secret: 'whsec_bmV3', previous_secret_expires_at: '2026-11-27T00:00:00.000Z' } }));
  owner('events.webhook.test', () => ({ status: 202, body: { id: DLV, webhook_id: WH, state: 'pending' } }));
  owner('events.delivery.list', (req) => ({ body: { deliveries: [], next_cursor: null, query: req.query } }));
  owner('events.delivery.redeliver', () => ({ status: 202, body: { id: DLV, webhook_id: WH, state: 'pending' } }));
  owner('events.stream.open', () => {
    throw new ApiError(400, 'validation_error', 'stand-in: no stream here');
  });
  await gw.bus.connection.flush();
  manager = await gw.partner(['--permissions', 'webhook_manage']);
  streamer = await gw.partner(['--permissions', 'events_read,health_read']);
});

afterAll(async () => {
  await gw?.close();
});

beforeEach(() => {
  reached.length = 0;
});

describe('validation: 400 validation_error, nothing reaches the events service', () => {
  const long = (n: number) => 'a'.repeat(n);
  const bad: Array<[string, string, unknown, RegExp?]> = [
    ['POST', '/v1/webhooks', { event_types: ['device.connected'] }, /url/],
    ['POST', '/v1/webhooks', { url: 'https://a.example/x' }, /event_types/],
    ['POST', '/v1/webhooks', { url: 'not a url', event_types: ['device.connected'] }, /url/],
    ['POST', '/v1/webhooks', { url: `https://a.example/${long(2040)}`, event_types: ['device.connected'] }, /url/],
    ['POST', '/v1/webhooks', { url: 'https://a.example/x', event_types: [] }, /event_types/],
    ['POST', '/v1/webhooks', { url: 'https://a.example/x', event_types: ['device.exploded'] }, /event_types/],
    ['POST', '/v1/webhooks', { url: 'https://a.example/x', event_types: ['webhook.test'] }, /event_types/],
    ['POST', '/v1/webhooks', { url: 'https://a.example/x', event_types: ['device.connected', 'device.connected'] }, /event_types/],
    ['POST', '/v1/webhooks', { url: 'https://a.example/x', event_types: ['device.connected'], description: long(501) }, /description/],
    ['POST', '/v1/webhooks', { url: 'https://a.example/x', event_types: ['device.connected'], enabled: 'yes' }, /enabled/],
    ['POST', '/v1/webhooks', { url: 'https://a.example/x', event_types: ['device.connected'], secret: 'mine' }, /unknown field 'secret'/],
    ['PATCH', `/v1/webhooks/${WH}`, {}, /fewer than 1/],
    ['PATCH', `/v1/webhooks/${WH}`, { event_types: [] }, /event_types/],
    ['PATCH', `/v1/webhooks/${WH}`, { id: WH }, /unknown field 'id'/],
    ['GET', '/v1/webhooks/wh_123', undefined, /webhook_id/],
    ['GET', `/v1/webhooks/${WH.toUpperCase()}`, undefined, /webhook_id/],
    ['DELETE', '/v1/webhooks/anything', undefined, /webhook_id/],
    ['POST', `/v1/webhooks/${WH}/rotate-secret`, { previous_expires_in_s: 604801 }, /previous_expires_in_s/],
    ['POST', `/v1/webhooks/${WH}/rotate-secret`, { previous_expires_in_s: -1 }, /previous_expires_in_s/],
    ['POST', `/v1/webhooks/${WH}/rotate-secret`, { previous_expires_in_s: 1.5 }, /previous_expires_in_s/],
    ['POST', `/v1/webhooks/${WH}/test`, { now: true }, /unknown field 'now'/],
    ['GET', `/v1/webhooks/${WH}/deliveries?state=failed`, undefined, /state/],
    ['GET', `/v1/webhooks/${WH}/deliveries?limit=0`, undefined, /limit/],
    ['GET', `/v1/webhooks/${WH}/deliveries?limit=201`, undefined, /limit/],
    ['GET', `/v1/webhooks/${WH}/deliveries?cursor=`, undefined, /cursor/],
    ['GET', `/v1/webhooks/${WH}/deliveries?since=2026-01-01`, undefined, /unknown query parameter 'since'/],
    ['POST', `/v1/webhooks/${WH}/deliveries/dlv_xyz/redeliver`, undefined, /delivery_id/],
  ];
  it.each(bad)('%s %s %j', async (method, path, body, message) => {
    const res = await call(gw.url, method, path, { key: manager.key, ...(body !== undefined ? { body } : {}) });
    expect({ status: res.status, code: res.body.code }).toEqual({ status: 400, code: 'validation_error' });
    expect(res.body.request_id).toBe(res.headers.get('x-request-id'));
    if (message) expect(res.body.error).toMatch(message);
    expect(reached).toEqual([]);
  });

  const badStream: Array<[string, Record<string, string>?, RegExp?]> = [
    ['/v1/events?types=device.exploded', undefined, /^invalid 'types': expected event types of the catalog, comma-separated without spaces/],
    ['/v1/events?types=device.connected,', undefined, /types/],
    ['/v1/events?types=device.connected, device.disconnected', undefined, /types/],
    ['/v1/events?types=webhook.test', undefined, /types/],
    ['/v1/events?device_id=0a1b2c3d4e5f', undefined, /device_id/],
    ['/v1/events?last_event_id=abc', undefined, /last_event_id/],
    ['/v1/events?last_event_id=-1', undefined, /last_event_id/],
    ['/v1/events?since=1', undefined, /unknown query parameter 'since'/],
    ['/v1/events', { 'Last-Event-ID': 'evt_1' }, /Last-Event-ID/],
    ['/v1/events?last_event_id=12', { 'Last-Event-ID': '12x' }, /Last-Event-ID/],
  ];
  it.each(badStream)('GET %s %j', async (path, headers, message) => {
    const res = await call(gw.url, 'GET', path, { key: streamer.key, ...(headers ? { headers } : {}) });
    expect({ status: res.status, code: res.body.code }).toEqual({ status: 400, code: 'validation_error' });
    if (message) expect(res.body.error).toMatch(message);
    expect(reached).toEqual([]);
  });

  it('refuses a body on the stream route', async () => {
    const answer = await new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
      const body = JSON.stringify({ types: 'device.connected' });
      const req = http.request(new URL('/v1/events', gw.url), { method: 'GET', headers: { authorization: `Bearer ${streamer.key}`, 'content-type': 'application/json', 'content-length': String(body.length) } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString('utf8')));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
      });
      req.on('error', reject);
      req.end(body);
    });
    expect([answer.status, answer.body.code]).toEqual([400, 'validation_error']);
    expect(answer.body.error).toMatch(/unknown field 'types'/);
    expect(reached).toEqual([]);
  });
});

describe('permissions: 403 forbidden naming the permission, nothing reaches the events service', () => {
  const webhookCalls: Array<[string, string, unknown?]> = [
    ['POST', '/v1/webhooks', { url: 'https://a.example/x', event_types: ['device.connected'] }],
    ['GET', '/v1/webhooks'],
    ['GET', `/v1/webhooks/${WH}`],
    ['PATCH', `/v1/webhooks/${WH}`, { enabled: false }],
    ['DELETE', `/v1/webhooks/${WH}`],
    ['POST', `/v1/webhooks/${WH}/rotate-secret`],
    ['POST', `/v1/webhooks/${WH}/test`],
    ['GET', `/v1/webhooks/${WH}/deliveries`],
    ['POST', `/v1/webhooks/${WH}/deliveries/${DLV}/redeliver`],
  ];

  it('every webhook route needs webhook_manage (events_read is not enough)', async () => {
    expect(webhookCalls).toHaveLength(eventRows.length - 1);
    for (const [method, path, body] of webhookCalls) {
      const res = await call(gw.url, method, path, { key: streamer.key, ...(body !== undefined ? { body } : {}) });
      expect({ route: `${method} ${path}`, status: res.status, code: res.body.code, permission: res.body.required_permission }).toEqual({
        route: `${method} ${path}`,
        status: 403,
        code: 'forbidden',
        permission: 'webhook_manage',
      });
    }
    expect(reached).toEqual([]);
  });

  it('the live stream needs events_read (webhook_manage is not enough), checked before validation', async () => {
    for (const path of ['/v1/events', '/v1/events?types=nope']) {
      const res = await call(gw.url, 'GET', path, { key: manager.key });
      expect([res.status, res.body.code, res.body.required_permission]).toEqual([403, 'forbidden', 'events_read']);
      expect(res.headers.get('ratelimit-limit')).toEqual(expect.any(String));
    }
    expect(reached).toEqual([]);
  });
});

describe('dispatch to the events service', () => {
  it('creates an endpoint: 201 with Location and the secret, the body and Idempotency-Key passed on, a replay answered by the gateway', async () => {
    const body = { url: 'https://hooks.example.com/in', event_types: [...PARTNER_EVENT_TYPES], description: 'Ops', enabled: true };
    const first = await call(gw.url, 'POST', '/v1/webhooks', { key: manager.key, body, headers: { 'Idempotency-Key': 'wh-create-1' } });
    expect(first.status).toBe(201);
    expect(first.headers.get('location')).toBe(`/v1/webhooks/${WH}`);
    expect(first.body.secret).toBe('whsec_c2VjcmV0');
    expect(reached).toHaveLength(1);
    expect(reached[0]?.subject).toBe('events.webhook.create');
    expect(reached[0]?.req).toMatchObject({ route: 'POST /v1/webhooks', body, idempotency_key: 'wh-create-1', principal: { permissions: ['webhook_manage'] } });
    const replay = await call(gw.url, 'POST', '/v1/webhooks', { key: manager.key, body, headers: { 'Idempotency-Key': 'wh-create-1' } });
    expect([replay.status, replay.headers.get('idempotent-replayed'), replay.headers.get('location')]).toEqual([201, 'true', `/v1/webhooks/${WH}`]);
    expect(reached).toHaveLength(1);
  });

  it('sends each route to its subject with its params, query and optional bodies', async () => {
    const cases: Array<[string, string, unknown, RequestSubject, number]> = [
      ['GET', '/v1/webhooks', undefined, 'events.webhook.list', 200],
      ['GET', `/v1/webhooks/${WH}`, undefined, 'events.webhook.get', 200],
      ['PATCH', `/v1/webhooks/${WH}`, { description: null }, 'events.webhook.update', 200],
      ['DELETE', `/v1/webhooks/${WH}`, undefined, 'events.webhook.delete', 204],
      ['POST', `/v1/webhooks/${WH}/rotate-secret`, undefined, 'events.webhook.rotate', 200],
      ['POST', `/v1/webhooks/${WH}/rotate-secret`, { previous_expires_in_s: 0 }, 'events.webhook.rotate', 200],
      ['POST', `/v1/webhooks/${WH}/test`, undefined, 'events.webhook.test', 202],
      ['GET', `/v1/webhooks/${WH}/deliveries?state=dead&limit=200&cursor=abc_-1`, undefined, 'events.delivery.list', 200],
      ['POST', `/v1/webhooks/${WH}/deliveries/${DLV}/redeliver`, undefined, 'events.delivery.redeliver', 202],
    ];
    for (const [method, path, body, subject, status] of cases) {
      reached.length = 0;
      const res = await call(gw.url, method, path, { key: manager.key, ...(body !== undefined ? { body } : {}) });
      expect({ path, status: res.status }).toEqual({ path, status });
      expect(reached.map((r) => r.subject)).toEqual([subject]);
      const req = reached[0]?.req as RequestEnvelope;
      if (path.includes(WH)) expect(req.params.webhook_id).toBe(WH);
      if (path.includes(DLV)) expect(req.params.delivery_id).toBe(DLV);
      if (body !== undefined) expect(req.body).toEqual(body);
      else expect(req.body).toBeUndefined();
    }
    expect(reached[0]?.req.query).toEqual({});
    const list = await call(gw.url, 'GET', `/v1/webhooks/${WH}/deliveries?state=dead&limit=200&cursor=abc_-1`, { key: manager.key });
    expect(list.body.query).toEqual({ state: 'dead', limit: 200, cursor: 'abc_-1' });
  });

  it('relays the events service’s refusals: 404 not_found, 403 limit_reached, 400 for a refused URL', async () => {
    refuseNext = new NotFoundError('No such webhook endpoint.');
    const missing = await call(gw.url, 'GET', `/v1/webhooks/${WH}`, { key: manager.key });
    expect([missing.status, missing.body.code]).toEqual([404, 'not_found']);
    expect(missing.body.required_permission).toBeUndefined();

    refuseNext = new ApiError(403, 'limit_reached', 'You already have 20 webhook endpoints.');
    const full = await call(gw.url, 'POST', '/v1/webhooks', { key: manager.key, body: { url: 'https://a.example/x', event_types: ['device.removed'] } });
    expect([full.status, full.body.code]).toEqual([403, 'limit_reached']);

    refuseNext = new ApiError(400, 'validation_error', 'The url resolves to a private address.');
    const ssrf = await call(gw.url, 'PATCH', `/v1/webhooks/${WH}`, { key: manager.key, body: { url: 'http://10.0.0.1/in' } });
    expect([ssrf.status, ssrf.body.code, ssrf.body.error]).toEqual([400, 'validation_error', 'The url resolves to a private address.']);
  });
});
