import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { testSubject, uniqueId } from '@fleet/test-kit';
import { answerClientErrors } from '../src/http/app';
import { isJsonMediaType, MAX_BODY_DEPTH } from '../src/http/request-validation';
import { routes as realRoutes } from '../src/routes/table';
import { buildOpenApiDocument } from '../src/openapi';
import { CONTROL_FREE_PATTERN, TIME_RANGE } from '../src/routes/schemas';
import type { JsonSchema, RouteDef } from '../src/routes/types';
import { call, startTestGateway, type CallResult, type TestGateway } from './support/harness';

// Malformed requests on synthetic routes whose owners are NATS responders of this file: every
// one is a 4xx with the error body, never a 5xx, and never reaches the owner.
const run = uniqueId('m');
const subject = (name: string) => testSubject(`test.${run}.${name}`);
const testRoutes: RouteDef[] = [
  ...realRoutes.filter((r) => r.path === '/v1/account'),
  {
    method: 'POST', path: '/v1/things/{thing_id}', operationId: 'createThing', tag: 'Test', summary: 'create',
    permission: null, target: { subject: subject('echo') }, idempotent: true,
    params: { thing_id: { type: 'string', minLength: 1 } },
    body: {
      type: 'object', required: ['name'], additionalProperties: false,
      properties: { name: { type: 'string', pattern: CONTROL_FREE_PATTERN }, note: { type: 'string' }, extra: { type: 'object' } },
    },
    responses: { 201: { description: 'created' } },
  },
  {
    method: 'POST', path: '/v1/things/{thing_id}/report', operationId: 'report', tag: 'Test', summary: 'no body',
    permission: null, target: { subject: subject('echo') }, idempotent: true, params: { thing_id: { type: 'string' } }, responses: { 202: { description: 'ok' } },
  },
  {
    method: 'POST', path: '/v1/guarded', operationId: 'guarded', tag: 'Test', summary: 'needs a permission',
    permission: 'raw_commands', target: { subject: subject('echo') }, idempotent: true,
    body: { type: 'object', properties: { name: { type: 'string' } } }, responses: { 200: { description: 'ok' } },
  },
  {
    method: 'GET', path: '/v1/search', operationId: 'search', tag: 'Test', summary: 'search', permission: null, target: { subject: subject('echo') },
    query: {
      properties: {
        hours: { type: 'integer', minimum: 1, maximum: 720 },
        offset: { type: 'integer', minimum: -10, maximum: 10 },
        ratio: { type: 'number' },
        flag: { type: 'boolean' },
        q: { type: 'string' },
        tz: { type: 'string', pattern: CONTROL_FREE_PATTERN },
      },
    },
    responses: { 200: { description: 'ok' } },
  },
];

let gw: TestGateway;
let key: string;
const reached: unknown[] = [];

beforeAll(async () => {
  gw = await startTestGateway(testRoutes);
  gw.bus.serve(subject('echo'), async (req) => {
    reached.push(req);
    return { status: 200, body: { params: req.params, query: req.query, ...(req.body !== undefined ? { body: req.body } : {}) } };
  });
  await gw.bus.connection.flush();
  key = (await gw.partner()).key;
});

afterAll(async () => {
  await gw.close();
});

/** The spec's error body with the request id of the X-Request-Id header, and Cache-Control: no-store. */
function expectError(res: CallResult, status: number, code: string, message?: RegExp): void {
  expect({ status: res.status, code: res.body.code }).toEqual({ status, code });
  expect(res.body).toEqual({ error: expect.any(String), code, request_id: res.headers.get('x-request-id') });
  expect(res.headers.get('x-request-id')).toMatch(/^req_/);
  expect(res.headers.get('cache-control')).toBe('no-store');
  if (message) expect(res.body.error).toMatch(message);
}

/** One request with headers given as raw lines (so a header may repeat), over node:http. */
function rawRequest(method: string, path: string, headers: Array<[string, string]>, body?: Buffer | string): Promise<CallResult> {
  const url = new URL(gw.url);
  const payload = body === undefined ? undefined : Buffer.from(body);
  // A header given as a list is sent as one line per value.
  const grouped: Record<string, string[]> = {};
  for (const [name, value] of headers) {
    const existing = Object.keys(grouped).find((k) => k.toLowerCase() === name.toLowerCase()) ?? name;
    (grouped[existing] ??= []).push(value);
  }
  if (payload) grouped['Content-Length'] = [String(payload.length)];
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers: grouped }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const hs = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') hs.set(k, v);
        let parsed: Record<string, unknown> = {};
        try {
          parsed = JSON.parse(text) as Record<string, unknown>;
        } catch {
          parsed = { raw: text };
        }
        resolve({ status: res.statusCode ?? 0, headers: hs, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

describe('Content-Encoding', () => {
  it.each([
    ['gzip with plain data', 'gzip', Buffer.from('{"name":"x"}')],
    ['gzip with gzip data', 'gzip', gzipSync('{"name":"x"}')],
    ['br', 'br', Buffer.from('{"name":"x"}')],
    ['an unknown coding', 'x-nonsense', Buffer.from('{"name":"x"}')],
    ['a list', 'identity, gzip', Buffer.from('{"name":"x"}')],
  ])('is 415 for %s, on any route, after the key (401 without one where a route matches)', async (_what, coding, body) => {
    const headers = { 'Content-Type': 'application/json', 'Content-Encoding': coding };
    expectError(await call(gw.url, 'POST', '/v1/things/a', { key, body: body.toString('latin1'), headers }), 415, 'unsupported_media_type', /Content-Encoding/);
    const keyless = await call(gw.url, 'POST', '/v1/things/a', { body: body.toString('latin1'), headers });
    expectError(keyless, 401, 'unauthorized');
    expect(keyless.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expectError(await call(gw.url, 'GET', '/v1/account', { key, headers: { 'Content-Encoding': coding } }), 415, 'unsupported_media_type');
    expectError(await call(gw.url, 'GET', '/v1/nowhere', { headers: { 'Content-Encoding': coding } }), 415, 'unsupported_media_type');
  });

  it('lets a client still sending a large body read its early refusal (415 for the coding, 413 past the limit), not a reset', async () => {
    // Far past what socket buffers hold: the gateway refuses while the client is still writing.
    const body = 'x'.repeat(4_000_000);
    const { hostname, port } = new URL(gw.url);
    for (const [coding, status, code] of [['br', 415, 'unsupported_media_type'], ['identity', 413, 'payload_too_large']] as const) {
      const head = `PUT /v1/things/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Encoding: ${coding}\r\nContent-Length: ${body.length}\r\n\r\n`;
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(port), hostname, () => socket.write(head + body));
        const chunks: Buffer[] = [];
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
        socket.on('error', reject);
      });
      expect(answer.split('\r\n')[0]).toBe(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}`);
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).code).toBe(code);
    }
  });

  it('counts a request refused before its body is read against a valid key: RateLimit-* headers, then 429 once the window is full', async () => {
    const tight = await gw.partner(['--requests-per-min', '4']);
    const oversize = 'x'.repeat(1_100_000);
    const refusals: Array<[number, string, () => Promise<CallResult>]> = [
      [415, 'unsupported_media_type', () => call(gw.url, 'POST', '/v1/things/a', { key: tight.key, body: '{"name":"x"}', headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' } })],
      [413, 'payload_too_large', () => call(gw.url, 'POST', '/v1/things/a', { key: tight.key, body: `{"name":"${oversize}"}` })],
      [400, 'validation_error', () => call(gw.url, 'GET', '/v1/search?q=%ZZ', { key: tight.key })],
    ];
    let remaining = 4;
    for (const [status, code, send] of refusals) {
      const res = await send();
      expectError(res, status, code);
      remaining -= 1;
      expect(res.headers.get('ratelimit-limit')).toBe('4');
      expect(res.headers.get('ratelimit-remaining')).toBe(String(remaining));
      expect(res.headers.get('ratelimit-reset')).toMatch(/^[0-9]+$/);
    }
    expect((await call(gw.url, 'GET', '/v1/account', { key: tight.key })).status).toBe(200);
    // The window is full: 429 comes before the media type, as for any request.
    const full = await refusals[0]![2]();
    expectError(full, 429, 'rate_limited');
    expect(full.headers.get('retry-after')).toMatch(/^[0-9]+$/);
    // Without a key nothing is counted: on a route, 401 comes first, as for any request; where no
    // route matches, the refusal stays what it was.
    const anonymous = await call(gw.url, 'POST', '/v1/things/a', { body: '{"name":"x"}', headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' } });
    expectError(anonymous, 401, 'unauthorized');
    expect(anonymous.headers.get('ratelimit-limit')).toBeNull();
    const nowhere = await call(gw.url, 'POST', '/v1/nowhere', { body: `{"name":"${oversize}"}` });
    expectError(nowhere, 413, 'payload_too_large');
    expect(nowhere.headers.get('ratelimit-limit')).toBeNull();
    const revoked = await call(gw.url, 'POST', '/v1/things/a', { key: `${tight.key}x`, body: `{"name":"${oversize}"}` });
    expectError(revoked, 401, 'unauthorized');
  });

  it('answers a caller without the route’s permission 403 before refusing the rest of the request', async () => {
    const without = await gw.partner(['--permissions', 'health_read']);
    const holder = await gw.partner(['--permissions', 'raw_commands']);
    const oversize = `{"name":"${'x'.repeat(1_100_000)}"}`;
    const requests: Array<[number, string, (key: string) => Promise<CallResult>]> = [
      [415, 'unsupported_media_type', (k) => call(gw.url, 'POST', '/v1/guarded', { key: k, body: '{}', headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' } })],
      [413, 'payload_too_large', (k) => call(gw.url, 'POST', '/v1/guarded', { key: k, body: oversize })],
      [400, 'validation_error', (k) => call(gw.url, 'POST', '/v1/guarded?q=%ZZ', { key: k, body: '{}' })],
      [400, 'validation_error', (k) => rawRequest('POST', '/v1/guarded', [['Authorization', `Bearer ${k}`], ['Content-Type', 'application/json'], ['Idempotency-Key', 'a'], ['Idempotency-Key', 'b']], '{}')],
    ];
    for (const [status, code, send] of requests) {
      const refused = await send(without.key);
      expect([refused.status, refused.body.code, refused.body.required_permission]).toEqual([403, 'forbidden', 'raw_commands']);
      expect(refused.headers.get('ratelimit-limit')).not.toBeNull();
      expectError(await send(holder.key), status, code);
    }
  });

  it('accepts identity', async () => {
    const res = await call(gw.url, 'POST', '/v1/things/a', { key, body: { name: 'x' }, headers: { 'Content-Encoding': 'Identity' } });
    expect(res.status).toBe(200);
  });
});

describe('text in the request', () => {
  it('refuses U+0000 anywhere: body values and field names, query values, path parameters', async () => {
    expectError(await call(gw.url, 'POST', '/v1/things/a', { key, body: { name: 'a\u0000b' } }), 400, 'validation_error', /'name'.*U\+0000/);
    expectError(await call(gw.url, 'POST', '/v1/things/a', { key, body: { name: 'a', note: '\u0000' } }), 400, 'validation_error', /'note'/);
    expectError(await call(gw.url, 'POST', '/v1/things/a', { key, body: { name: 'a', extra: { deep: ['ok', 'x\u0000'] } } }), 400, 'validation_error', /'extra\.deep\.1'/);
    expectError(await call(gw.url, 'POST', '/v1/things/a', { key, body: { name: 'a', extra: { 'k\u0000': 1 } } }), 400, 'validation_error', /field name in 'extra'/);
    expectError(await call(gw.url, 'GET', '/v1/search?q=%00', { key }), 400, 'validation_error', /'q'.*U\+0000/);
    expectError(await call(gw.url, 'GET', '/v1/search?q=a&q=%00', { key }), 400, 'validation_error', /'q\.1'/);
    expectError(await call(gw.url, 'POST', '/v1/things/%00', { key, body: { name: 'x' } }), 400, 'validation_error', /'thing_id'/);
  });

  it('refuses lone surrogates', async () => {
    expectError(await call(gw.url, 'POST', '/v1/things/a', { key, body: '{"name":"\\ud800"}' }), 400, 'validation_error', /'name'.*Unicode/);
    expectError(await call(gw.url, 'GET', '/v1/search?q=%ED%A0%80', { key }), 400, 'validation_error', /query string/);
  });

  it('refuses other control characters only in name-like fields', async () => {
    for (const c of ['\u0001', '\n', '\u001f', '\u007f']) {
      expectError(await call(gw.url, 'POST', '/v1/things/a', { key, body: { name: `a${c}b` } }), 400, 'validation_error', /'name': must not contain control characters/);
      expectError(await call(gw.url, 'GET', `/v1/search?tz=${encodeURIComponent(`Europe/${c}`)}`, { key }), 400, 'validation_error', /'tz'/);
    }
    const fine = await call(gw.url, 'POST', '/v1/things/a', { key, body: { name: 'Zürich ☃ 北', note: 'line\nbreak' } });
    expect(fine.status).toBe(200);
    expect(fine.body.body).toEqual({ name: 'Zürich ☃ 北', note: 'line\nbreak' });
  });

  it('refuses a query string that is not percent-encoded UTF-8', async () => {
    for (const q of ['q=%ZZ', 'q=%E0%A4%A', 'q=%FF', '%C3=1']) {
      expectError(await call(gw.url, 'GET', `/v1/search?${q}`, { key }), 400, 'validation_error', /query string/);
      expectError(await call(gw.url, 'GET', `/v1/nowhere?${q}`, {}), 400, 'validation_error', /query string/);
    }
    const fine = await call(gw.url, 'GET', '/v1/search?q=%C3%A9+x%2B', { key });
    expect(fine.body.query).toEqual({ q: 'é x+' });
  });

  it('refuses a body that is not UTF-8', async () => {
    const res = await rawRequest('POST', '/v1/things/a', [['Authorization', `Bearer ${key}`], ['Content-Type', 'application/json']], Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]));
    expectError(res, 400, 'validation_error', /UTF-8/);
  });
});

describe('query numbers and booleans', () => {
  it.each(['0x10', '1e1', ' 16', '16 ', '+16', '16.0', '0b1', '', 'Infinity', '99999999999999999999'])('refuses hours=%j', async (value) => {
    expectError(await call(gw.url, 'GET', `/v1/search?hours=${encodeURIComponent(value)}`, { key }), 400, 'validation_error', /'hours'/);
  });

  it('refuses a parameter given twice and booleans other than true/false', async () => {
    expectError(await call(gw.url, 'GET', '/v1/search?hours=1&hours=2', { key }), 400, 'validation_error', /'hours'/);
    for (const v of ['1', 'yes', 'TRUE', '']) expectError(await call(gw.url, 'GET', `/v1/search?flag=${v}`, { key }), 400, 'validation_error', /'flag'/);
    for (const v of ['0x1', '1e3', '.5', '5.']) expectError(await call(gw.url, 'GET', `/v1/search?ratio=${v}`, { key }), 400, 'validation_error', /'ratio'/);
  });

  it('reads plain decimal values, signed where the range allows it', async () => {
    const res = await call(gw.url, 'GET', '/v1/search?hours=016&offset=-3&ratio=-2.5&flag=false&q=0x10', { key });
    expect(res.status).toBe(200);
    expect(res.body.query).toEqual({ hours: 16, offset: -3, ratio: -2.5, flag: false, q: '0x10' });
    expectError(await call(gw.url, 'GET', '/v1/search?hours=-3', { key }), 400, 'validation_error', /'hours'/);
  });
});

describe('headers sent twice', () => {
  it.each(['Content-Type', 'Idempotency-Key', 'Content-Encoding'])('is 400 for two %s headers', async (name) => {
    const value = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Idempotency-Key': 'k1', 'Content-Encoding': 'identity' }[name] as string;
    const headers: Array<[string, string]> = [['Authorization', `Bearer ${key}`], ['Content-Type', 'application/json'], [name, value]];
    if (name === 'Idempotency-Key' || name === 'Content-Encoding') headers.push([name, value]);
    const res = await rawRequest('POST', '/v1/things/a', headers, '{"name":"x"}');
    expectError(res, 400, 'validation_error', new RegExp(`${name} header was sent more than once`, 'i'));
  });

  it('is the generic 401 for two keys, a valid one first or not, counted against neither', async () => {
    const other = `Bearer pdk_zzzzzzzzzzzz_${'A'.repeat(32)}`;
    for (const pair of [[`Bearer ${key}`, other], [other, `Bearer ${key}`], [`Bearer ${key}`, `Bearer ${key}`]]) {
      const res = await rawRequest('GET', '/v1/account', [['Authorization', pair[0]!], ['authorization', pair[1]!]]);
      expectError(res, 401, 'unauthorized', /valid API key/);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer realm="[^"]+", error="invalid_token"$/);
      expect(res.headers.get('ratelimit-limit')).toBeNull();
    }
  });
});

describe('body rules on every route', () => {
  it('takes only utf-8 JSON (or no charset): anything else is 415', async () => {
    for (const type of ['application/json; charset=utf-16', 'application/json;charset=latin1', 'text/json', 'application/json-patch+json', 'application/json; charset', 'text/plain']) {
      expectError(await call(gw.url, 'POST', '/v1/things/a', { key, body: '{"name":"x"}', headers: { 'Content-Type': type } }), 415, 'unsupported_media_type');
    }
    for (const type of ['application/json', 'Application/JSON; charset="UTF-8"', 'application/json;charset=utf-8; v=1']) {
      expect((await call(gw.url, 'POST', '/v1/things/a', { key, body: '{"name":"x"}', headers: { 'Content-Type': type } })).status).toBe(200);
    }
    expect(isJsonMediaType(undefined)).toBe(false);
  });

  it('lets a route that takes no body have none, or {} as JSON; anything else is refused', async () => {
    const before = reached.length;
    expectError(await call(gw.url, 'POST', '/v1/things/a/report', { key, body: 'hello', headers: { 'Content-Type': 'text/plain' } }), 415, 'unsupported_media_type');
    expectError(await call(gw.url, 'POST', '/v1/things/a/report', { key, body: { force: true } }), 400, 'validation_error', /takes no body.*'force'/);
    expectError(await call(gw.url, 'POST', '/v1/things/a/report', { key, body: '[]' }), 400, 'validation_error');
    expectError(await call(gw.url, 'POST', '/v1/things/a/report', { key, body: '{' }), 400, 'validation_error');
    expect(reached.length).toBe(before);
    const empty = await call(gw.url, 'POST', '/v1/things/a/report', { key });
    expect([empty.status, empty.body.body]).toEqual([200, undefined]);
    const braces = await call(gw.url, 'POST', '/v1/things/a/report', { key, body: {} });
    expect([braces.status, braces.body.body]).toEqual([200, undefined]);
    // A GET with a body follows the same rules.
    const get = (body: string) => rawRequest('GET', '/v1/account', [['Authorization', `Bearer ${key}`], ['Content-Type', 'application/json']], body);
    expectError(await get('{"a":1}'), 400, 'validation_error', /takes no body/);
    expect((await get('{}')).status).toBe(200);
  });

  it('refuses a body nested deeper than the limit, with or without an Idempotency-Key', async () => {
    const deep = `{"name":"x","extra":${'['.repeat(200_000)}${']'.repeat(200_000)}}`;
    for (const headers of [{}, { 'Idempotency-Key': `deep-${uniqueId()}` }] as Array<Record<string, string>>) {
      expectError(await call(gw.url, 'POST', '/v1/things/a', { key, body: deep, headers }), 400, 'validation_error', new RegExp(`${MAX_BODY_DEPTH} levels`));
    }
    const nested = (n: number): unknown => (n === 0 ? {} : { a: nested(n - 1) });
    expect((await call(gw.url, 'POST', '/v1/things/a', { key, body: { name: 'x', extra: nested(MAX_BODY_DEPTH - 2) } })).status).toBe(200);
  });
});

describe('the real route table and its documents', () => {
  const find = (method: string, path: string) => realRoutes.find((r) => r.method === method && r.path === path) as RouteDef;
  const prop = (schema: JsonSchema | undefined, name: string) => ((schema?.properties ?? {}) as Record<string, JsonSchema>)[name];

  it('declares name-like fields control-free', () => {
    const provision = find('POST', '/v1/devices/{device_id}');
    for (const [schema, name] of [
      [provision.body, 'name'],
      [provision.body, 'org'],
      [find('PATCH', '/v1/devices/{device_id}/config').body, 'name'],
      [find('POST', '/v1/devices/{device_id}/channels/{channel}/effects').body, 'command'],
      [find('POST', '/v1/devices/{device_id}/commands').body, 'payload'],
      [{ properties: find('GET', '/v1/meter/devices/{device_id}/energy').query?.properties }, 'tz'],
    ] as Array<[JsonSchema | undefined, string]>) {
      expect(prop(schema, name)?.pattern).toBe(CONTROL_FREE_PATTERN);
    }
  });

  it('states the supported date range on every time parameter, in the reference and in the guide', async () => {
    const times = realRoutes.flatMap((r) => Object.entries(r.query?.properties ?? {}).filter(([n]) => ['start', 'end', 'received_since'].includes(n)));
    expect(times.length).toBeGreaterThanOrEqual(7);
    for (const [, schema] of times) expect(schema.description).toEqual(expect.stringContaining(`${TIME_RANGE.min} to ${TIME_RANGE.max}`));
    const doc = buildOpenApiDocument(realRoutes);
    expect(String((doc.info as Record<string, unknown>).description)).toContain(TIME_RANGE.max);
    const guide = await (await fetch(`${gw.url}/docs`)).text();
    expect(guide).toContain(`${TIME_RANGE.min} to ${TIME_RANGE.max}`);
    expect(guide).toContain('Content-Encoding');
  });
});

describe('what the HTTP parser refuses', () => {
  let server: http.Server;
  let port: number;
  beforeAll(async () => {
    server = http.createServer((_req, res) => res.end('ok'));
    answerClientErrors(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const send = (bytes: Buffer): Promise<string> =>
    new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
      socket.on('error', reject);
    });

  const parse = (answer: string) => {
    const [head = '', body = ''] = answer.split('\r\n\r\n');
    const [statusLine = '', ...lines] = head.split('\r\n');
    const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
    return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) as Record<string, unknown> };
  };

  it('answers raw non-ASCII bytes in the path with 400 and the error body', async () => {
    const answer = parse(await send(Buffer.concat([Buffer.from('GET /v1/devices/'), Buffer.from([0xc3, 0xa9]), Buffer.from(' HTTP/1.1\r\nHost: x\r\n\r\n')])));
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ error: expect.any(String), code: 'validation_error', request_id: answer.headers['x-request-id'] });
    expect(answer.headers['cache-control']).toBe('no-store');
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
  });

  it('answers headers over the limit with 431 headers_too_large', async () => {
    const answer = parse(await send(Buffer.from(`GET /v1/account HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)));
    expect(answer.status).toBe(431);
    expect(answer.body).toEqual({ error: expect.any(String), code: 'headers_too_large', request_id: answer.headers['x-request-id'] });
  });

  it('lets a client that is still sending an oversized request read the 431 (a lingering close, not a reset)', async () => {
    // Far past what socket buffers hold: the gateway answers while the client is still writing.
    const answer = parse(await send(Buffer.from(`GET /v1/meter/devices/0123456789AB/energy?bucket=${'%F0%9F%98%80'.repeat(200_000)} HTTP/1.1\r\nHost: x\r\n\r\n`)));
    expect(answer.status).toBe(431);
    expect(answer.body.code).toBe('headers_too_large');
  });

  it('answers broken framing (two different Content-Length headers) with 400', async () => {
    const answer = parse(await send(Buffer.from('POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab')));
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe('validation_error');
  });
});
