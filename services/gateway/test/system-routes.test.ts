import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DeviceSummary, RequestEnvelope } from '@fleet/contracts';
import { closeGently, ConflictError, NotFoundError } from '@fleet/service-kit';
import { randomDeviceId } from '@fleet/test-kit';
import { routes as realRoutes } from '../src/routes/table';
import { call, startTestGateway, type TestGateway } from './support/harness';

/**
 * The gateway's part of the system routes, with their real rows and stand-in owners on NATS:
 * the tier a verb or a settings key needs (from the verb registry), the destructive ceiling,
 * and platform file uploads streamed to the URL the owner names, never buffered.
 */

const systemRows = realRoutes.filter((r) => r.path === '/v1/account' || r.tag === 'System');
let gw: TestGateway;
const devices = new Map<string, DeviceSummary>();
const sent: RequestEnvelope[] = [];

/** The owner's file server as the gateway sees it: counts what arrives, answers like system-files. */
let received = 0;
let answerEarly: { status: number; code: string; retryAfter?: string } | undefined;
let uploadServer: http.Server;
let uploadUrl = '';

beforeAll(async () => {
  gw = await startTestGateway(systemRows, { DESTRUCTIVE_PER_HOUR: '1' });
  gw.bus.serve('registry.scope.resolve', async (req) => {
    const device = devices.get(req.params.device_id ?? '');
    if (!device) throw new NotFoundError('Device not found.');
    return { body: device };
  });
  gw.bus.serve('system.command.send', async (req) => {
    sent.push(req);
    const body = req.body as { command: string; confirm?: string };
    if (['factory_reset', 'formatfs'].includes(body.command) && body.confirm !== req.device?.device_id) throw new ConflictError('Confirm.', 'confirmation_required');
    return { status: 202, body: { command: body.command } };
  });
  gw.bus.serve('system.settings.put', async (req) => (sent.push(req), { status: 202, body: { key: req.params.key } }));
  uploadServer = http.createServer((req, res) => {
    const hash = createHash('sha256');
    let size = 0;
    if (answerEarly) {
      const { status, code, retryAfter } = answerEarly;
      // As system-files refuses: Connection: close, the rest of the body left unread.
      closeGently(req.socket, { graceMs: 2000, drain: false });
      res.writeHead(status, { 'content-type': 'application/json', connection: 'close', ...(retryAfter ? { 'retry-after': retryAfter } : {}) });
      res.end(JSON.stringify({ error: 'no', code, request_id: req.headers['x-request-id'] }));
      return;
    }
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      received += chunk.length;
      hash.update(chunk);
    });
    req.on('end', () => {
      res.writeHead(201, { 'content-type': 'application/json', location: '/v1/system/files?dir=files&name=a.mp3' });
      res.end(JSON.stringify({ bytes: size, sha256: hash.digest('hex'), type: req.headers['content-type'], request_id: req.headers['x-request-id'] }));
    });
  });
  await new Promise<void>((resolve) => uploadServer.listen(0, '127.0.0.1', resolve));
  uploadUrl = `http://127.0.0.1:${(uploadServer.address() as AddressInfo).port}/uploads/ticket`;
  gw.bus.serve('system.upload.open', async () => ({ body: { url: uploadUrl, max_bytes: 1024 * 1024 } }));
  await gw.bus.connection.flush();
});

afterAll(async () => {
  uploadServer?.closeAllConnections();
  await new Promise((resolve) => uploadServer?.close(resolve));
  await gw?.close();
});

const device = (): string => {
  const id = randomDeviceId();
  devices.set(id, { device_id: id, product: 'light', org_node_id: 1, name: null });
  return id;
};

describe('tiers', () => {
  it('admits either tier to the route, then needs the verb’s own tier, never reaching the owner without it', async () => {
    const id = device();
    const none = await gw.partner(['--permissions', 'system_read', '--access-all-devices']);
    const control = await gw.partner(['--permissions', 'system_control', '--access-all-devices']);
    const destructive = await gw.partner(['--permissions', 'system_destructive', '--access-all-devices']);
    const post = (key: string, body: unknown) => call(gw.url, 'POST', `/v1/devices/${id}/system/commands`, { key, body });
    sent.length = 0;
    expect((await post(none.key, { command: 'query' })).body).toMatchObject({ code: 'forbidden', required_permission: 'system_control' });
    expect((await post(control.key, { command: 'factory_reset', confirm: id })).body).toMatchObject({ code: 'forbidden', required_permission: 'system_destructive' });
    expect((await post(control.key, { command: 'set', params: { key: 'mqttPass', value: 'x' }, confirm: id })).body).toMatchObject({ required_permission: 'system_destructive' });
    expect((await post(destructive.key, { command: 'query' })).body).toMatchObject({ code: 'forbidden', required_permission: 'system_control' });
    expect(sent).toEqual([]);
    expect((await post(control.key, { command: 'query' })).status).toBe(202);
    expect((await post(control.key, { command: 'nosuch' })).status).toBe(202); // the owner answers unknown verbs (400)
    const put = (key: string, name: string) => call(gw.url, 'PUT', `/v1/devices/${id}/system/settings/${name}`, { key, body: { value: 1, confirm: id } });
    expect((await put(control.key, 'tlsMode')).body).toMatchObject({ required_permission: 'system_destructive' });
    expect((await put(control.key, 'volume')).status).toBe(202);
    expect((await put(destructive.key, 'mqttPort')).status).toBe(202);
  });

  it('names the permission the request’s own tier needs, before its media type and body are looked at', async () => {
    const id = device();
    const none = await gw.partner(['--permissions', 'system_read', '--access-all-devices']);
    const control = await gw.partner(['--permissions', 'system_control', '--access-all-devices']);
    const post = (key: string, body: unknown) => call(gw.url, 'POST', `/v1/devices/${id}/system/commands`, { key, body });
    const put = (key: string, name: string, body: unknown, headers?: Record<string, string>) =>
      call(gw.url, 'PUT', `/v1/devices/${id}/system/settings/${name}`, { key, body, ...(headers ? { headers } : {}) });
    sent.length = 0;
    expect((await post(none.key, { command: 'factory_reset', confirm: id })).body).toMatchObject({ code: 'forbidden', required_permission: 'system_destructive' });
    expect((await put(none.key, 'mqttUser', { value: 'u', confirm: id })).body).toMatchObject({ code: 'forbidden', required_permission: 'system_destructive' });
    expect((await put(none.key, 'volume', { value: 1 })).body).toMatchObject({ code: 'forbidden', required_permission: 'system_control' });
    // A body the route would refuse (a missing value, a mistyped confirm, not JSON) still gets the 403 first.
    expect((await put(control.key, 'mqttPass', { confirm: id })).body).toMatchObject({ code: 'forbidden', required_permission: 'system_destructive' });
    expect((await post(control.key, { command: 'factory_reset', confirm: 7 })).body).toMatchObject({ code: 'forbidden', required_permission: 'system_destructive' });
    const notJson = await put(control.key, 'tlsMode', 'value=1', { 'Content-Type': 'text/plain' });
    expect([notJson.status, notJson.body.required_permission]).toEqual([403, 'system_destructive']);
    expect(sent).toEqual([]);
    // With the tier held, the body's own refusals come next.
    expect((await put(control.key, 'volume', 'value=1', { 'Content-Type': 'text/plain' })).status).toBe(415);
    expect((await put(control.key, 'volume', { confirm: id })).body.code).toBe('validation_error');
  });

  it('answers 404 for a device id of another form, as for an unknown device, on every device route', async () => {
    const control = await gw.partner(['--permissions', 'system_control,system_read', '--access-all-devices']);
    for (const [method, path, body] of [
      ['PUT', '/v1/devices/0123456789ab/system/settings/volume', { value: 1 }],
      ['POST', '/v1/devices/0123456789ab/system/commands', { command: 'query' }],
      ['GET', '/v1/devices/not-a-device/files/t1', undefined],
    ] as const) {
      const res = await call(gw.url, method, path, { key: control.key, ...(body ? { body } : {}) });
      expect({ path, status: res.status, code: res.body.code }).toEqual({ path, status: 404, code: 'not_found' });
    }
  });

  it('spends destructive requests from the hourly ceiling; one refused by the owner is refunded', async () => {
    const id = device();
    const p = await gw.partner(['--permissions', 'system_control,system_destructive', '--access-all-devices']);
    const post = (body: unknown) => call(gw.url, 'POST', `/v1/devices/${id}/system/commands`, { key: p.key, body });
    expect((await post({ command: 'formatfs' })).body.code).toBe('confirmation_required');
    expect((await post({ command: 'query' })).status).toBe(202);
    expect((await post({ command: 'formatfs', confirm: id })).status).toBe(202);
    const over = await post({ command: 'factory_reset', confirm: id });
    expect([over.status, over.body.code]).toEqual([429, 'rate_limited']);
    expect(over.headers.get('retry-after')).toEqual(expect.any(String));
    expect((await post({ command: 'query' })).status).toBe(202);
  });
});

describe('uploads', () => {
  let key: string;
  beforeAll(async () => {
    key = (await gw.partner(['--permissions', 'file_upload'])).key;
  });

  const form = (bytes: Buffer): FormData => {
    const f = new FormData();
    f.set('dir', 'files');
    f.set('file', new Blob([bytes]), 'a.mp3');
    return f;
  };

  it('streams the multipart body to the owner as sent and relays its answer and Location', async () => {
    const bytes = Buffer.alloc(300_000, 7);
    const res = await fetch(`${gw.url}/v1/system/files`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: form(bytes) });
    const body = (await res.json()) as Record<string, unknown>;
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe('/v1/system/files?dir=files&name=a.mp3');
    expect(res.headers.get('ratelimit-limit')).toEqual(expect.any(String));
    expect(body.type).toMatch(/^multipart\/form-data; boundary=/);
    expect(body.request_id).toBe(res.headers.get('x-request-id'));
    expect(Number(body.bytes)).toBeGreaterThan(bytes.length);
  });

  it('refuses what is not multipart (415) and a missing permission (403)', async () => {
    const json = await call(gw.url, 'POST', '/v1/system/files', { key, body: { dir: 'files' } });
    expect([json.status, json.body.code]).toEqual([415, 'unsupported_media_type']);
    const other = await gw.partner(['--permissions', 'system_read']);
    const refused = await fetch(`${gw.url}/v1/system/files`, { method: 'POST', headers: { Authorization: `Bearer ${other.key}` }, body: form(Buffer.alloc(10)) });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as Record<string, unknown>).required_permission).toBe('file_upload');
  });

  it('answers 413 at once for a body declared larger than the owner takes, without passing it on', async () => {
    received = 0;
    const answer = await rawPost(`/v1/system/files`, key, 3 * 1024 * 1024, 16 * 1024, true);
    expect(answer.status).toBe(413);
    expect(answer.body).toMatchObject({ code: 'payload_too_large' });
    expect(answer.sentBeforeAnswer).toBeLessThan(1024 * 1024);
    expect(received).toBe(0);
  });

  it('relays the owner’s early answer (a body that turned out too large) before the client finished sending', async () => {
    answerEarly = { status: 413, code: 'payload_too_large' };
    try {
      const answer = await rawPost(`/v1/system/files`, key, 1024 * 1024, 16 * 1024, true);
      expect([answer.status, answer.body.code]).toEqual([413, 'payload_too_large']);
      expect(answer.sentBeforeAnswer).toBeLessThan(1024 * 1024);
    } finally {
      answerEarly = undefined;
    }
  });

  it('relays the Retry-After of the owner’s 503 (its store out of reach)', async () => {
    answerEarly = { status: 503, code: 'service_unavailable', retryAfter: '1' };
    try {
      const res = await fetch(`${gw.url}/v1/system/files`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: form(Buffer.alloc(10)) });
      expect([res.status, res.headers.get('retry-after')]).toEqual([503, '1']);
    } finally {
      answerEarly = undefined;
    }
  });

  it('is 503 when the owner’s file server cannot be reached', async () => {
    const saved = uploadUrl;
    uploadUrl = 'http://127.0.0.1:9/uploads/ticket';
    try {
      const res = await fetch(`${gw.url}/v1/system/files`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: form(Buffer.alloc(10)) });
      expect(res.status).toBe(503);
    } finally {
      uploadUrl = saved;
    }
  });
});

/**
 * A multipart POST of `total` declared bytes, written in chunks of `chunk` as fast as the
 * connection takes them (or throttled), stopping once an answer arrives: how much was written
 * before the answer came back.
 */
function rawPost(path: string, key: string, total: number, chunk: number, throttle = false): Promise<{ status: number; body: Record<string, unknown>; sentBeforeAnswer: number }> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, gw.url);
    let sent = 0;
    let answered = false;
    const req = http.request(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data; boundary=xyz', 'content-length': String(total) } }, (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      const at = sent;
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>, sentBeforeAnswer: at });
      });
    });
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    const head = Buffer.from('--xyz\r\nContent-Disposition: form-data; name="dir"\r\n\r\nfiles\r\n--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.mp3"\r\n\r\n');
    req.write(head);
    sent += head.length;
    const pump = () => {
      while (!answered && sent < total) {
        const n = Math.min(chunk, total - sent);
        sent += n;
        if (!req.write(Buffer.alloc(n, 1))) {
          req.once('drain', pump);
          return;
        }
        if (throttle) {
          setTimeout(pump, 5);
          return;
        }
      }
      if (!answered) req.end();
    };
    pump();
  });
}
