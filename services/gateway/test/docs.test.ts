import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import { PARTNER_EVENT_TYPES, permissionToReceive, WEBHOOK_TEST_TYPE } from '@fleet/contracts';
import { CHANGELOG, docsRouter } from '../src/docs';
import { buildOpenApiDocument, ERROR_CODES } from '../src/openapi';
import { routes } from '../src/routes/table';

const document = buildOpenApiDocument(routes);
// A description that tries to break out of the embedding <script> element.
const hostile = structuredClone(document);
(hostile.info as Record<string, unknown>).description = 'evil </script><script>alert(1)</script> <!-- & \u2028 done';

let server: Server;
let base: string;

beforeAll(async () => {
  const app = express();
  // As the gateway does before the docs: conventions on every response.
  app.use((_req, res, next) => {
    res.setHeader('X-Request-Id', 'req_test');
    res.setHeader('Cache-Control', 'no-store');
    next();
  });
  app.use(docsRouter(() => document));
  app.use('/prefixed', docsRouter(() => hostile));
  // What the gateway mounts after the docs: authenticated /v1 routes.
  app.use('/v1', (_req, res) => {
    res.status(401).json({ code: 'unauthorized' });
  });
  app.use((_req, res) => {
    res.status(404).json({ code: 'unknown_route' });
  });
  server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
});

const get = (path: string): Promise<Response> => fetch(`${base}${path}`);

const sha256 = (text: string): string => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/** Parses a CSP header into directive -> sources. */
function csp(res: Response): Map<string, string[]> {
  const header = res.headers.get('content-security-policy') ?? '';
  return new Map(
    header
      .split(';')
      .map((d) => d.trim().split(/\s+/))
      .filter((parts) => parts[0])
      .map(([name, ...sources]) => [name as string, sources]),
  );
}

function inlineBlocks(html: string, tag: 'script' | 'style'): { attrs: string; body: string }[] {
  return [...html.matchAll(new RegExp(`<${tag}([^>]*)>([\\s\\S]*?)</${tag}>`, 'g'))].map((m) => ({ attrs: m[1] ?? '', body: m[2] ?? '' }));
}

/** No attribute in the page loads anything from another origin. */
function expectNoExternalResources(html: string): void {
  for (const m of html.matchAll(/\s(src|href|action|poster|srcset)\s*=\s*"([^"]*)"/g)) {
    const url = m[2] ?? '';
    if (m[1] === 'href' && url.startsWith('#')) continue;
    expect(url).toMatch(/^\/(?!\/)/);
  }
  expect(html).not.toMatch(/<link\b/i);
  expect(html).not.toMatch(/@import|fonts\.googleapis|fonts\.gstatic|cdn\./i);
}

describe('docsRouter', () => {
  it('serves the OpenAPI document as JSON without authentication', async () => {
    const res = await get('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await res.json()).toEqual(JSON.parse(JSON.stringify(document)));
  });

  it('serves the quick-start guide as a self-contained page', async () => {
    const res = await get('/docs');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await res.text();
    expect(html.startsWith('<!doctype html>')).toBe(true);
    for (const text of ['Authorization: Bearer', 'curl', '/v1/account', 'HTTPS', 'Idempotency-Key', 'Idempotent-Replayed', 'next_cursor', 'Retry-After', 'RateLimit-Remaining', 'Deprecation', 'Sunset', 'X-Request-Id', 'request_id', 'required_permission', '600', 'access_all_devices']) {
      expect(html).toContain(text);
    }
    for (const { code } of ERROR_CODES) expect(html).toContain(code);
    for (const link of ['/docs_adv', '/openapi.json', '/changelog']) expect(html).toContain(`href="${link}"`);
    // The base URL is the serving host with the scheme it was served on (plain HTTP here,
    // as on a local fleet without TLS), never an https:// it does not answer.
    expect(html).toContain(`http://${new URL(base).host}`);
    expect(html).not.toContain(`https://${new URL(base).host}`);
    const proxied = await (await fetch(`${base}/docs`, { headers: { 'X-Forwarded-Proto': 'https' } })).text();
    expect(proxied).toContain(`http://${new URL(base).host}`);

    const policy = csp(res);
    expect(policy.get('default-src')).toEqual(["'none'"]);
    expect(policy.has('script-src')).toBe(false);
    const styles = inlineBlocks(html, 'style');
    expect(styles).toHaveLength(1);
    expect(policy.get('style-src')).toEqual([sha256(styles[0]?.body ?? '')]);
    expect(html).not.toMatch(/<script\b/i);
    expectNoExternalResources(html);
  });

  it('explains push events in the guide: the envelope, every type with its permission, webhooks and the live stream', async () => {
    const html = await (await get('/docs')).text();
    expect(html).toContain('<section id="push-events">');
    expect(html).toContain('href="#push-events"');
    const section = html.slice(html.indexOf('<section id="push-events">'), html.indexOf('</section>', html.indexOf('<section id="push-events">')));
    for (const type of [...PARTNER_EVENT_TYPES, WEBHOOK_TEST_TYPE]) expect(section).toContain(`<code>${type}</code>`);
    for (const type of PARTNER_EVENT_TYPES) {
      const permission = permissionToReceive(type);
      const line = section.split('\n').find((l) => l.includes(`<td><code>${type}</code></td>`)) ?? '';
      expect({ type, line: line.includes(permission === null ? 'none' : `<code>${permission}</code>`) }).toEqual({ type, line: true });
    }
    for (const text of [
      'evt_', 'occurred_at', 'within 5 seconds', 'POST /v1/webhooks', 'shown only in this answer', 'rotate-secret', 'previous_expires_in_s',
      'standardwebhooks', 'new Webhook(', 'wh.verify(', 'webhook-id', 'webhook-timestamp', 'webhook-signature', 'whsec_', 'HMAC-SHA256',
      'within 10 seconds', 'a redirect', 'at least once', '11 attempts', '5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, 10 h, 10 h, 14 h', 'about 2.6 days', '<code>dead</code>',
      'sent one at a time', 'compare <code>occurred_at</code>', '/deliveries', '/redeliver', '/test', 'private, loopback or link-local', 'npm start', 'loopback and private receivers',
      'curl -N', 'GET /v1/events', 'types=', '<code>device_id</code>', 'Last-Event-ID', 'last_event_id', '7 days', ': keep-alive', 'every 15 seconds',
      'At most 5 streams', '20 webhook endpoints', '30 days',
    ]) {
      expect({ text, found: section.includes(text) }).toEqual({ text, found: true });
    }
    // The verifying example is five lines.
    const verify = /<pre><code>(import \{ Webhook \}[\s\S]*?)<\/code><\/pre>/.exec(section)?.[1] ?? '';
    expect(verify.split('\n')).toHaveLength(5);
  });

  it('serves the Redoc reference with the document embedded and only same-origin scripts', async () => {
    const res = await get('/docs_adv');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await res.text();

    const scripts = inlineBlocks(html, 'script');
    const external = scripts.filter((s) => /\ssrc=/.test(s.attrs));
    expect(external).toHaveLength(1);
    for (const s of external) expect(s.attrs).toMatch(/\ssrc="\/docs_adv\/redoc\.standalone\.js(\?[^"]*)?"/);

    const data = scripts.find((s) => /type="application\/json"/.test(s.attrs));
    expect(JSON.parse(data?.body ?? 'null')).toEqual(JSON.parse(JSON.stringify(document)));

    const init = scripts.find((s) => !/\s(src|type)=/.test(s.attrs));
    expect(init?.body).toContain('Redoc.init(');
    expect(init?.body).toContain('"disableSearch":false');
    expect(init?.body).toContain('fontFamily');

    const policy = csp(res);
    expect(policy.get('default-src')).toEqual(["'none'"]);
    const scriptSrc = policy.get('script-src') ?? [];
    expect(scriptSrc).toContain("'self'");
    expect(scriptSrc).toContain(sha256(init?.body ?? ''));
    expect(scriptSrc.join(' ')).not.toMatch(/https?:|\*|'unsafe-eval'/);
    expect(policy.get('worker-src')).toEqual(['blob:']);
    for (const [directive, sources] of policy) {
      expect({ directive, external: sources.filter((s) => /^(https?:|\*)/.test(s)) }).toEqual({ directive, external: [] });
    }
    expectNoExternalResources(html);
  });

  it('escapes the embedded document so it cannot leave its <script> element', async () => {
    const res = await get('/prefixed/docs_adv');
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).not.toContain('</script><script>alert(1)');
    expect(html).not.toContain('<!--');
    const data = inlineBlocks(html, 'script').find((s) => /type="application\/json"/.test(s.attrs));
    expect(JSON.parse(data?.body ?? 'null')).toEqual(JSON.parse(JSON.stringify(hostile)));
    // Links follow the mount point.
    expect(html).toContain('src="/prefixed/docs_adv/redoc.standalone.js');
    const guide = await (await get('/prefixed/docs')).text();
    expect(guide).toContain('href="/prefixed/docs_adv"');
  });

  it('serves the Redoc bundle from the same origin with a long cache lifetime', async () => {
    const html = await (await get('/docs_adv')).text();
    const src = /<script[^>]*\ssrc="([^"]+)"/.exec(html)?.[1] ?? '';
    const res = await get(src);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^(application|text)\/javascript/);
    expect(res.headers.get('cache-control')).toMatch(/max-age=31536000/);
    expect(res.headers.get('cache-control')).toMatch(/immutable/);
    const body = await res.text();
    expect(Buffer.byteLength(body)).toBe(statSync(require.resolve('redoc/bundles/redoc.standalone.js')).size);
    expect(body).toContain('Redoc');
  });

  it('serves the changelog from the typed entries', async () => {
    const res = await get('/changelog');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(csp(res).get('default-src')).toEqual(["'none'"]);
    const html = await res.text();
    expect(CHANGELOG[0]).toMatchObject({ version: '1.0.0', date: '2026-11-22' });
    for (const entry of CHANGELOG) {
      expect(html).toContain(entry.version);
      expect(html).toContain(`<time datetime="${entry.date}">`);
    }
    expect(html).toContain('<code>GET /v1/account</code>');
    expectNoExternalResources(html);
  });

  it('answers only its own paths, and only GET and HEAD there, and lets everything else through', async () => {
    expect((await get('/v1/account')).status).toBe(401);
    expect((await get('/docs/other')).status).toBe(404);
    const head = await fetch(`${base}/docs`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    for (const path of ['/docs', '/openapi.json', '/docs_adv', '/changelog', '/prefixed/docs']) {
      const other = await fetch(`${base}${path}`, { method: 'POST' });
      expect([other.status, other.headers.get('allow')]).toEqual([405, 'GET, HEAD']);
    }
  });
});
