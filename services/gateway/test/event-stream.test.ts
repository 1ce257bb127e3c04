/**
 * GET /v1/events through the gateway: the events service is stood in for by a responder on
 * `events.stream.open` (NATS) and by an HTTP server of this file standing in for its stream
 * server. The gateway relays the text/event-stream body as it arrives, ends the partner's answer
 * when the upstream ends, destroys the upstream when the partner leaves, answers refusals of the
 * subject and of the stream server as JSON errors, and 503 when the stream server is out of reach.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestEnvelope } from '@fleet/contracts';
import { ApiError, metricsRegistry, NotFoundError, RateLimitedError } from '@fleet/service-kit';
import { uniqueId, waitFor } from '@fleet/test-kit';
import { OpenStreams } from '../src/http/stream';
import { routes as realRoutes } from '../src/routes/table';
import { call, startTestGateway, type TestGateway } from './support/harness';

const streamRoute = realRoutes.filter((r) => r.path === '/v1/events');
const IDLE_MS = 1500;

/** One GET the stand-in stream server received, and its answer. */
interface Upstream {
  url: string;
  requestId: string | undefined;
  accept: string | undefined;
  res: http.ServerResponse;
  closed: boolean;
}

/** How the stand-in stream server answers the next GET. */
type UpstreamMode = { kind: 'stream' } | { kind: 'refuse'; status: number; body: string; headers?: Record<string, string> } | { kind: 'silent' };

let gw: TestGateway;
const streams = new OpenStreams();
let streamServer: http.Server;
let streamBase = '';
const upstreams: Upstream[] = [];
let upstreamMode: UpstreamMode = { kind: 'stream' };
const opens: RequestEnvelope[] = [];
let openRefusal: (() => ApiError) | undefined;
let openUrl: (() => string) | undefined;
let reader: { id: string; key: string };
const clients: StreamClient[] = [];

beforeAll(async () => {
  streamServer = http.createServer((req, res) => {
    const upstream: Upstream = { url: req.url ?? '', requestId: req.headers['x-request-id'] as string | undefined, accept: req.headers.accept, res, closed: false };
    upstreams.push(upstream);
    res.on('close', () => (upstream.closed = true));
    const mode = upstreamMode;
    if (mode.kind === 'refuse') {
      res.writeHead(mode.status, { 'content-type': 'application/json', ...mode.headers });
      res.end(mode.body);
    } else if (mode.kind === 'stream') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.flushHeaders();
    }
  });
  await new Promise<void>((resolve) => streamServer.listen(0, '127.0.0.1', resolve));
  streamBase = `http://127.0.0.1:${(streamServer.address() as AddressInfo).port}`;

  gw = await startTestGateway(streamRoute, {}, { streams, streamTimeouts: { headMs: 1000, idleMs: IDLE_MS } });
  gw.bus.serve('events.stream.open', async (req) => {
    opens.push(req);
    if (openRefusal) throw openRefusal();
    return { body: { url: openUrl?.() ?? `${streamBase}/streams/${uniqueId('tk')}` } };
  });
  await gw.bus.connection.flush();
  reader = await gw.partner(['--permissions', 'events_read,health_read', '--grant', '5']);
});

afterEach(() => {
  for (const c of clients.splice(0)) c.req.destroy();
  upstreamMode = { kind: 'stream' };
  openRefusal = undefined;
  openUrl = undefined;
});

afterAll(async () => {
  streamServer?.closeAllConnections();
  await new Promise((resolve) => streamServer?.close(resolve));
  await gw?.close();
});

interface StreamClient {
  req: http.ClientRequest;
  res: http.IncomingMessage;
  readonly text: string;
  readonly ended: boolean;
}

/** Opens GET `path` and resolves with the answer's head; its body accumulates in `text`. */
function openStream(path: string, key = reader.key, headers: Record<string, string> = {}, method = 'GET'): Promise<StreamClient> {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(path, gw.url), { method, headers: { authorization: `Bearer ${key}`, ...headers } }, (res) => {
      let text = '';
      let ended = false;
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => (ended = true));
      res.on('error', () => (ended = true));
      const client: StreamClient = {
        req,
        res,
        get text() {
          return text;
        },
        get ended() {
          return ended;
        },
      };
      clients.push(client);
      resolve(client);
    });
    req.on('error', reject);
    req.end();
  });
}

const frame = (id: number, type: string, event: Record<string, unknown>): string => `id: ${id}\nevent: ${type}\ndata: ${JSON.stringify(event)}\n\n`;
const event = (n: number) => ({ id: `evt_${String(n).padStart(32, '0')}`, type: 'device.connected', version: 1, occurred_at: new Date().toISOString(), device_id: '0A1B2C3D4E5F', data: { status: 'connected', status_changed_at: new Date().toISOString() } });
const lastUpstream = (): Upstream => upstreams[upstreams.length - 1] as Upstream;

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const m = (await metricsRegistry.getMetricsAsJSON()).find((x) => x.name === name);
  const values = (m?.values ?? []) as Array<{ value: number; labels: Record<string, unknown> }>;
  return values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;
}

describe('relaying the stream', () => {
  it('answers the SSE head at once and relays each frame as it arrives, ending when the upstream ends', async () => {
    const before = upstreams.length;
    const client = await openStream('/v1/events');
    expect(client.res.statusCode).toBe(200);
    expect(client.res.headers['content-type']).toBe('text/event-stream');
    expect(client.res.headers['cache-control']).toBe('no-store');
    expect(client.res.headers['x-accel-buffering']).toBe('no');
    expect(client.res.headers['x-request-id']).toMatch(/^req_/);
    expect(client.res.headers['ratelimit-limit']).toBe('600');
    expect(upstreams.length).toBe(before + 1);
    const upstream = lastUpstream();
    expect(upstream.requestId).toBe(client.res.headers['x-request-id']);
    expect(upstream.accept).toBe('text/event-stream');

    // Each frame reaches the partner before the next is written: nothing waits in a buffer.
    const frames = [frame(1, 'device.connected', event(1)), ': keep-alive\n\n', frame(2, 'device.connected', event(2))];
    let expected = '';
    for (const f of frames) {
      upstream.res.write(f);
      expected += f;
      await waitFor(() => client.text === expected, { timeoutMs: 2000, what: `frame ${JSON.stringify(f.slice(0, 12))} relayed` });
    }
    expect(client.ended).toBe(false);
    upstream.res.end();
    await waitFor(() => client.ended, { what: 'the partner’s answer ended' });
    expect(client.text).toBe(expected);
    expect(streams.size).toBe(0);
  });

  it('sends the principal, the filters and the resume position to events.stream.open (the header wins over the query)', async () => {
    opens.length = 0;
    await openStream('/v1/events?types=device.connected,meter.records_stored&device_id=0A1B2C3D4E5F&last_event_id=17', reader.key, { 'Last-Event-ID': '42' });
    await openStream('/v1/events?last_event_id=17');
    await openStream('/v1/events', reader.key, { 'Last-Event-ID': ' ' });
    expect(opens).toHaveLength(3);
    const [first, second, third] = opens as [RequestEnvelope, RequestEnvelope, RequestEnvelope];
    expect(first).toMatchObject({ route: 'GET /v1/events', params: {}, principal: { partner_id: reader.id, permissions: ['health_read', 'events_read'], org_grants: [5] } });
    expect(first.query).toEqual({ types: 'device.connected,meter.records_stored', device_id: '0A1B2C3D4E5F', last_event_id: '42' });
    expect(second.query).toEqual({ last_event_id: '17' });
    expect(third.query).toEqual({});
    expect(first.request_id).toMatch(/^req_/);
  });

  it('stays open past the bus timeout while events flow (no request timeout), and closes a stream that falls silent', async () => {
    const client = await openStream('/v1/events');
    const upstream = lastUpstream();
    const started = Date.now();
    for (let i = 0; Date.now() - started < 2500; i++) {
      upstream.res.write(': keep-alive\n\n');
      await new Promise((r) => setTimeout(r, 400));
    }
    upstream.res.write(frame(9, 'device.connected', event(9)));
    await waitFor(() => client.text.includes('id: 9\n'), { what: 'a frame after 2.5 s' });
    expect(client.ended).toBe(false);

    // Silent past IDLE_MS: the gateway ends the partner's answer (its client reconnects) and lets the upstream go.
    await waitFor(() => client.ended, { timeoutMs: IDLE_MS + 2000, what: 'the silent stream ended' });
    await waitFor(() => upstream.closed, { what: 'the upstream request destroyed' });
  });
});

describe('the partner leaves', () => {
  it('destroys the upstream request when the client disconnects, and still counts the answer', async () => {
    const counted = await metric('fleet_http_requests_total', { route: '/v1/events', method: 'GET', status: '200' });
    const client = await openStream('/v1/events');
    const upstream = lastUpstream();
    upstream.res.write(frame(3, 'device.connected', event(3)));
    expect(client.res.socket?.destroyed).toBe(false);
    await waitFor(() => client.text.includes('id: 3\n'));
    expect(streams.size).toBe(1);
    client.req.destroy();
    await waitFor(() => upstream.closed, { what: 'the upstream request destroyed' });
    await waitFor(() => streams.size === 0, { what: 'the stream forgotten' });
    await waitFor(async () => (await metric('fleet_http_requests_total', { route: '/v1/events', method: 'GET', status: '200' })) === counted + 1, { what: 'the stream counted' });
  });

  it('ends every open stream on shutdown', async () => {
    const a = await openStream('/v1/events');
    const b = await openStream('/v1/events?types=device.removed');
    const [ua, ub] = upstreams.slice(-2) as [Upstream, Upstream];
    expect(streams.size).toBe(2);
    const sockets = [a.res.socket, b.res.socket];
    streams.endAll();
    await waitFor(() => a.ended && b.ended, { what: 'both answers ended' });
    await waitFor(() => ua.closed && ub.closed, { what: 'both upstreams destroyed' });
    expect(streams.size).toBe(0);
    // The connections close too: a kept-alive one would hold the closing server open.
    await waitFor(() => sockets.every((socket) => socket?.destroyed), { timeoutMs: 1000, what: 'both connections closed' });
  });

  it('answers HEAD with the head of the stream and lets the upstream go', async () => {
    const client = await openStream('/v1/events', reader.key, {}, 'HEAD');
    expect(client.res.statusCode).toBe(200);
    expect(client.res.headers['content-type']).toBe('text/event-stream');
    await waitFor(() => client.ended, { what: 'the HEAD answer ended' });
    await waitFor(() => lastUpstream().closed);
  });
});

describe('the key or the permission that opened a stream changes', () => {
  it('ends a stream whose key is revoked, and the client reconnecting gets 401', async () => {
    const holder = await gw.partner(['--permissions', 'events_read', '--grant', '5']);
    const second = await gw.admin('key', 'issue', '--partner', holder.id);
    const kept = await openStream('/v1/events', holder.key);
    const keptUpstream = lastUpstream();
    const revoked = await openStream('/v1/events', String(second.key));
    const revokedUpstream = lastUpstream();
    await gw.admin('key', 'revoke', '--key-prefix', String(second.key_prefix));
    // Heard as a change (Postgres NOTIFY), well before the periodic check.
    await waitFor(() => revoked.ended, { timeoutMs: 3000, what: 'the revoked key’s stream ended' });
    await waitFor(() => revokedUpstream.closed, { what: 'its upstream destroyed' });
    expect((await call(gw.url, 'GET', '/v1/events', { key: String(second.key) })).status).toBe(401);
    // The partner's other key keeps its stream.
    await streams.recheck();
    expect(kept.ended).toBe(false);
    expect(keptUpstream.closed).toBe(false);
  });

  it('ends a stream whose partner lost events_read or was disabled; a change to another partner ends nothing', async () => {
    const losing = await gw.partner(['--permissions', 'events_read,health_read', '--grant', '5']);
    const disabled = await gw.partner(['--permissions', 'events_read', '--grant', '5']);
    const bystander = await openStream('/v1/events');
    const a = await openStream('/v1/events', losing.key);
    const b = await openStream('/v1/events', disabled.key);
    await gw.admin('partner', 'update', '--id', losing.id, '--permissions', 'health_read');
    await waitFor(() => a.ended, { timeoutMs: 3000, what: 'the stream of the partner without events_read ended' });
    expect(b.ended).toBe(false);
    await gw.admin('partner', 'disable', '--id', disabled.id);
    await waitFor(() => b.ended, { timeoutMs: 3000, what: 'the disabled partner’s stream ended' });
    const refused = await call(gw.url, 'GET', '/v1/events', { key: losing.key });
    expect([refused.status, refused.body.code, refused.body.required_permission]).toEqual([403, 'forbidden', 'events_read']);
    await streams.recheck();
    expect(bystander.ended).toBe(false);
  });

  it('checks open streams on its own every few seconds, and keeps a stream whose check cannot be made', async () => {
    const own = new OpenStreams(50);
    let allowed: boolean | Error = true;
    const ended: string[] = [];
    // As a relayed stream does, each forgets itself when it ends.
    const forgetChecked = own.track(
      () => {
        ended.push('checked');
        forgetChecked();
      },
      async () => {
        if (allowed instanceof Error) throw allowed;
        return allowed;
      },
    );
    const forgetUnchecked = own.track(() => {
      ended.push('unchecked');
      forgetUnchecked();
    });
    allowed = new Error('key store unavailable');
    expect(await own.recheck()).toBe(0);
    allowed = false;
    // No change heard: the periodic check finds it.
    await waitFor(() => ended.length > 0, { timeoutMs: 2000, what: 'the periodic check' });
    expect(ended).toEqual(['checked']);
    expect(own.size).toBe(1);
    own.endAll();
    expect(ended).toEqual(['checked', 'unchecked']);
    expect(own.size).toBe(0);
  });
});

describe('refusals before the stream starts: the usual JSON error', () => {
  const expectError = (res: Awaited<ReturnType<typeof call>>, status: number, code: string) => {
    expect({ status: res.status, code: res.body.code }).toEqual({ status, code });
    expect(res.body.request_id).toBe(res.headers.get('x-request-id'));
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('cache-control')).toBe('no-store');
  };

  it('relays the events service’s refusal: 404 for a device out of scope, 429 with Retry-After past 5 open streams, 400', async () => {
    const before = upstreams.length;
    openRefusal = () => new NotFoundError('Device not found.');
    expectError(await call(gw.url, 'GET', '/v1/events?device_id=0A1B2C3D4E5F', { key: reader.key }), 404, 'not_found');
    openRefusal = () => new RateLimitedError('You already hold 5 open event streams.', 7);
    const full = await call(gw.url, 'GET', '/v1/events', { key: reader.key });
    expectError(full, 429, 'rate_limited');
    expect(full.headers.get('retry-after')).toBe('7');
    openRefusal = () => new ApiError(400, 'validation_error', 'last_event_id is older than the retention window');
    expectError(await call(gw.url, 'GET', '/v1/events?last_event_id=1', { key: reader.key }), 400, 'validation_error');
    expect(upstreams.length).toBe(before);
  });

  it('relays the stream server’s JSON error with this request’s id and Retry-After', async () => {
    upstreamMode = { kind: 'refuse', status: 429, body: JSON.stringify({ error: 'Too many streams.', code: 'rate_limited', request_id: 'req_other' }), headers: { 'retry-after': '3' } };
    const res = await call(gw.url, 'GET', '/v1/events', { key: reader.key });
    expectError(res, 429, 'rate_limited');
    expect(res.body.error).toBe('Too many streams.');
    expect(res.headers.get('retry-after')).toBe('3');

    upstreamMode = { kind: 'refuse', status: 410, body: JSON.stringify({ error: 'This stream ticket was used.', code: 'gone' }) };
    expectError(await call(gw.url, 'GET', '/v1/events', { key: reader.key }), 410, 'gone');
  });

  it('is 503 when the stream server answers no error body, a 401 about its ticket, or nothing in time', async () => {
    for (const mode of [
      { kind: 'refuse', status: 502, body: '<html>bad gateway</html>' },
      { kind: 'refuse', status: 401, body: JSON.stringify({ error: 'Bad ticket.', code: 'unauthorized' }) },
      { kind: 'refuse', status: 302, body: '{}', headers: { location: '/elsewhere' } },
      { kind: 'silent' },
    ] as UpstreamMode[]) {
      upstreamMode = mode;
      const res = await call(gw.url, 'GET', '/v1/events', { key: reader.key });
      expectError(res, 503, 'service_unavailable');
      expect(res.headers.get('retry-after')).toEqual(expect.any(String));
      expect(res.headers.get('www-authenticate')).toBeNull();
    }
    await waitFor(() => lastUpstream().closed, { what: 'the silent upstream let go' });
  });

  it('is 503 with Retry-After, never 404, when the stream server no longer knows its one-time URL (expired on the way, or used)', async () => {
    // What the events service's stream server answers for a URL it does not know (any more).
    upstreamMode = { kind: 'refuse', status: 404, body: JSON.stringify({ error: 'No such stream: its URL is unknown, used or expired.', code: 'not_found' }) };
    const res = await call(gw.url, 'GET', '/v1/events', { key: reader.key });
    expectError(res, 503, 'service_unavailable');
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.body.error).not.toMatch(/No such stream/);
    await waitFor(() => lastUpstream().closed, { what: 'the upstream let go' });

    // A device out of scope is still 404: events.stream.open says so, before any stream server is asked.
    upstreamMode = { kind: 'stream' };
    const before = upstreams.length;
    openRefusal = () => new NotFoundError('Device not found.');
    expectError(await call(gw.url, 'GET', '/v1/events?device_id=0A1B2C3D4E5F', { key: reader.key }), 404, 'not_found');
    expect(upstreams.length).toBe(before);
  });

  it('is 503 when the stream server cannot be reached, or the events service does not answer', async () => {
    openUrl = () => 'http://127.0.0.1:9/streams/nowhere';
    expectError(await call(gw.url, 'GET', '/v1/events', { key: reader.key }), 503, 'service_unavailable');
    openUrl = undefined;
    const other = await startTestGateway(streamRoute);
    try {
      const p = await other.partner(['--permissions', 'events_read']);
      const res = await call(other.url, 'GET', '/v1/events', { key: p.key });
      expectError(res, 503, 'service_unavailable');
    } finally {
      await other.close();
    }
  });

  it('spends one request of the partner’s window per stream opened; a full window is 429 before the events service is asked', async () => {
    const tight = await gw.partner(['--permissions', 'events_read', '--requests-per-min', '2']);
    opens.length = 0;
    const first = await openStream('/v1/events', tight.key);
    expect(first.res.headers['ratelimit-remaining']).toBe('1');
    const second = await call(gw.url, 'GET', '/v1/events?types=nope', { key: tight.key });
    expect(second.status).toBe(400);
    const third = await call(gw.url, 'GET', '/v1/events', { key: tight.key });
    expect([third.status, third.body.code]).toEqual([429, 'rate_limited']);
    expect(third.headers.get('retry-after')).toEqual(expect.any(String));
    expect(opens).toHaveLength(1);
  });
});
