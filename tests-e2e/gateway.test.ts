import SwaggerParser from '@apidevtools/swagger-parser';
import { admin, adminFails, api, partnerWithKey } from './support/api';

const ALL_PERMISSIONS = [
  'state_read', 'health_read', 'device_provisioning', 'device_removal', 'system_read', 'system_control', 'system_destructive',
  'file_upload', 'file_delete', 'config_read', 'config_write', 'profile_manage', 'signal_manage', 'raw_commands',
  'predefined_commands', 'relaxed_caps', 'automation_control', 'energy_read', 'energy_reset', 'access_all_devices',
  'raw_mqtt_devices', 'raw_mqtt_global', 'events_read', 'webhook_manage',
];

describe('GET /v1/account', () => {
  it('describes a partner created and keyed with the admin CLI, with the documented defaults', async () => {
    const p = await partnerWithKey();
    const res = await api('GET', '/v1/account', { key: p.key });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      partner: {
        name: p.name,
        key_prefix: p.keyPrefix,
        permissions: Object.fromEntries(ALL_PERMISSIONS.map((k) => [k, false])),
        allowed_channels: ['light1', 'light2', 'light3', 'sound', 'contact'],
        rate_limits: { requests_per_min: 600, device_commands_per_min: 60 },
      },
    });
    expect(p.keyPrefix).toMatch(/^[a-z]+_[a-z0-9]+$/);
    expect(p.key.startsWith(`${p.keyPrefix}_`)).toBe(true);
  });

  it('shows exactly the permissions, channels and limits staff set', async () => {
    const p = await partnerWithKey([
      '--permissions', 'state_read,energy_reset', '--access-all-devices', '--channels', 'light2,contact',
      '--requests-per-min', '120', '--device-commands-per-min', '7',
    ]);
    const { body } = await api('GET', '/v1/account', { key: p.key });
    const partner = body.partner as Record<string, unknown>;
    const granted = Object.entries(partner.permissions as Record<string, boolean>).filter(([, v]) => v).map(([k]) => k);
    expect(granted.sort()).toEqual(['access_all_devices', 'energy_reset', 'state_read']);
    expect(partner.allowed_channels).toEqual(['light2', 'contact']);
    expect(partner.rate_limits).toEqual({ requests_per_min: 120, device_commands_per_min: 7 });
  });

  it('grants every permission but the scope and internal raw MQTT ones with --permissions all', async () => {
    const p = await partnerWithKey(['--permissions', 'all', '--grant', '1']);
    const { body } = await api('GET', '/v1/account', { key: p.key });
    const permissions = (body.partner as { permissions: Record<string, boolean> }).permissions;
    const refused = Object.entries(permissions).filter(([, v]) => !v).map(([k]) => k);
    expect(refused.sort()).toEqual(['access_all_devices', 'raw_mqtt_devices', 'raw_mqtt_global']);
    const everything = await partnerWithKey(['--permissions', 'all,raw_mqtt_devices,raw_mqtt_global', '--access-all-devices']);
    const all = await api('GET', '/v1/account', { key: everything.key });
    expect(Object.values((all.body.partner as { permissions: Record<string, boolean> }).permissions).every(Boolean)).toBe(true);
  });

  it('refuses granted organizations beside access_all_devices with exit code 2', async () => {
    const refused = await adminFails('partner', 'create', '--name', 'Both', '--permissions', 'all', '--access-all-devices', '--grant', '1');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--grant.*exclude each other/);
    expect(refused.stdout).toBe('');
  });
});

describe('authentication', () => {
  const expectGeneric401 = (res: Awaited<ReturnType<typeof api>>, keySent: boolean) => {
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: 'A valid API key is required.', code: 'unauthorized', request_id: res.headers.get('x-request-id') });
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer realm="[^"]+"/);
    expect(challenge.includes('error="invalid_token"')).toBe(keySent);
    expect(res.headers.get('ratelimit-limit')).toBeNull();
  };

  it('answers a missing key without error=invalid_token', async () => {
    expectGeneric401(await api('GET', '/v1/account'), false);
  });

  it('answers malformed, unknown and wrong-secret keys with the same generic 401', async () => {
    const p = await partnerWithKey();
    const wrongSecret = `${p.keyPrefix}_${'A'.repeat(32)}`;
    for (const header of ['Bearer not-a-key', 'Bearer two words', `Bearer pdk_zzzzzzzzzzzz_${'B'.repeat(32)}`, `Bearer ${wrongSecret}`]) {
      expectGeneric401(await api('GET', '/v1/account', { headers: { Authorization: header } }), true);
    }
  });

  it('answers another scheme or an empty Bearer as no key: no error code (RFC 6750 §3.1)', async () => {
    for (const header of ['Bearer', 'Bearer   ', `Basic ${Buffer.from('a:b').toString('base64')}`]) {
      expectGeneric401(await api('GET', '/v1/account', { headers: { Authorization: header } }), false);
    }
  });

  it('lets a partner hold several keys and revokes one on the next request', async () => {
    const p = await partnerWithKey();
    const second = await admin('key', 'issue', '--partner', p.id);
    expect((await api('GET', '/v1/account', { key: p.key })).status).toBe(200);
    expect((await api('GET', '/v1/account', { key: String(second.key) })).body.partner).toMatchObject({ key_prefix: second.key_prefix });
    expect(await admin('key', 'revoke', '--key-prefix', p.keyPrefix)).toEqual({ key_prefix: p.keyPrefix, revoked: true });
    expectGeneric401(await api('GET', '/v1/account', { key: p.key }), true);
    expect((await api('GET', '/v1/account', { key: String(second.key) })).status).toBe(200);
  });

  it('refuses every key of a disabled partner on the next request', async () => {
    const p = await partnerWithKey();
    expect((await api('GET', '/v1/account', { key: p.key })).status).toBe(200);
    await admin('partner', 'disable', '--id', p.id);
    expectGeneric401(await api('GET', '/v1/account', { key: p.key }), true);
  });

  it('applies a permission change on the next request', async () => {
    const p = await partnerWithKey();
    await api('GET', '/v1/account', { key: p.key });
    await admin('partner', 'update', '--id', p.id, '--permissions', 'health_read');
    const { body } = await api('GET', '/v1/account', { key: p.key });
    expect((body.partner as { permissions: Record<string, boolean> }).permissions.health_read).toBe(true);
  });
});

describe('response conventions', () => {
  it('puts X-Request-Id and Cache-Control: no-store on every response, and RateLimit-* on authenticated ones', async () => {
    const p = await partnerWithKey();
    const answers = [
      await api('GET', '/v1/account', { key: p.key }),
      await api('GET', '/v1/account'),
      await api('GET', '/v1/nowhere', { key: p.key }),
      await api('DELETE', '/v1/account', { key: p.key }),
    ];
    const ids = answers.map((a) => a.headers.get('x-request-id'));
    expect(new Set(ids).size).toBe(answers.length);
    for (const a of answers) {
      expect(a.headers.get('x-request-id')).toMatch(/^req_/);
      expect(a.headers.get('cache-control')).toBe('no-store');
      if (a.status !== 401) {
        expect(a.body.request_id ?? a.headers.get('x-request-id')).toBe(a.headers.get('x-request-id'));
        expect(a.headers.get('ratelimit-limit')).toBe('600');
      }
    }
  });

  it('answers 404 unknown_route for a URL no route matches', async () => {
    const res = await api('GET', '/v1/does-not-exist');
    expect([res.status, res.body.code, res.body.request_id]).toEqual([404, 'unknown_route', res.headers.get('x-request-id')]);
  });

  it('answers 405 method_not_allowed with Allow when the path exists', async () => {
    const p = await partnerWithKey();
    const res = await api('PUT', '/v1/account', { key: p.key, body: {} });
    expect([res.status, res.body.code]).toEqual([405, 'method_not_allowed']);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
  });

  it('answers 405 method_not_allowed on the documents’ paths too', async () => {
    for (const path of ['/openapi.json', '/docs', '/docs_adv', '/changelog']) {
      const res = await api('POST', path, { body: {} });
      expect([res.status, res.body.code, res.headers.get('allow')]).toEqual([405, 'method_not_allowed', 'GET, HEAD']);
      expect(res.body.request_id).toBe(res.headers.get('x-request-id'));
    }
  });
});

describe('per-partner request limit', () => {
  it('counts down RateLimit-Remaining, then answers 429 with Retry-After and Remaining 0', async () => {
    const p = await partnerWithKey(['--requests-per-min', '3']);
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await api('GET', '/v1/account', { key: p.key }));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
    expect(answers.map((a) => a.headers.get('ratelimit-remaining'))).toEqual(['2', '1', '0', '0']);
    for (const a of answers) {
      expect(a.headers.get('ratelimit-limit')).toBe('3');
      const reset = Number(a.headers.get('ratelimit-reset'));
      expect(reset).toBeGreaterThanOrEqual(1);
      expect(reset).toBeLessThanOrEqual(60);
    }
    const refused = answers[3]!;
    expect(refused.body.code).toBe('rate_limited');
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
  });

  it('keeps partners apart', async () => {
    const a = await partnerWithKey(['--requests-per-min', '1']);
    const b = await partnerWithKey(['--requests-per-min', '1']);
    expect((await api('GET', '/v1/account', { key: a.key })).status).toBe(200);
    expect((await api('GET', '/v1/account', { key: b.key })).status).toBe(200);
    expect((await api('GET', '/v1/account', { key: a.key })).status).toBe(429);
  });
});

describe('admin CLI errors', () => {
  it('exits non-zero with a message on stderr and nothing on stdout', async () => {
    for (const argv of [
      ['partner', 'create'],
      ['partner', 'create', '--name', 'x', '--permissions', 'root'],
      ['partner', 'create', '--name', 'x', '--channels', 'light9'],
      ['partner', 'update', '--id', '00000000-0000-0000-0000-000000000000', '--name', 'y'],
      ['key', 'issue', '--partner', 'nope'],
      ['key', 'revoke', '--key-prefix', 'pdk_missing'],
      ['partner', 'fly'],
    ]) {
      const failure = await adminFails(...argv);
      expect(failure.code).not.toBe(0);
      expect(failure.stderr).toMatch(/^admin: /m);
      expect(failure.stdout).toBe('');
    }
  });
});

describe('documents', () => {
  it('serves an OpenAPI 3.1 document, version 1.0.0, that validates and describes /v1/account', async () => {
    const res = await api('GET', '/openapi.json');
    expect(res.status).toBe(200);
    const doc = JSON.parse(res.text) as { openapi: string; info: { version: string }; paths: Record<string, Record<string, Record<string, unknown>>> };
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.0.0');
    await SwaggerParser.validate(JSON.parse(res.text));
    const account = doc.paths['/v1/account']?.get;
    expect(account).toBeDefined();
    expect(Object.keys(account?.responses as object)).toEqual(expect.arrayContaining(['200', '401', '429']));
  });

  it.each(['/docs', '/docs_adv', '/changelog'])('serves %s as a self-contained HTML page', async (page) => {
    const res = await api('GET', page);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.text).not.toMatch(/<script[^>]+src="https?:/);
  });
});
