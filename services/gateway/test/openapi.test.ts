import { describePartnerEvent, PARTNER_EVENT_TYPES, permissionToReceive, WEBHOOK_TEST_TYPE } from '@fleet/contracts';
import { testSubject } from '@fleet/test-kit';
import SwaggerParser from '@apidevtools/swagger-parser';
import { buildOpenApiDocument, deriveErrors } from '../src/openapi';
import { deviceIdParam, errorSchema } from '../src/routes/schemas';
import { routes as tableRoutes } from '../src/routes/table';
import type { RouteDef } from '../src/routes/types';

type Json = Record<string, unknown>;

const commandResult = {
  type: 'object',
  required: ['channel', 'command'],
  properties: { channel: { type: 'string' }, payload: { type: 'string' }, command: { type: 'string' } },
};

/** Synthetic rows covering what the real table does not yet exercise. */
const synthetic: RouteDef[] = [
  {
    method: 'POST',
    path: '/v1/devices/{device_id}/commands',
    operationId: 'sendRawCommand',
    tag: 'Light commands',
    summary: 'Send a raw command to a light channel',
    permission: 'raw_commands',
    target: { subject: testSubject('lights.command') },
    device: { product: 'light' },
    params: { device_id: deviceIdParam },
    body: {
      type: 'object',
      required: ['channel', 'payload'],
      properties: { channel: { type: 'string' }, payload: { type: 'string' } },
      additionalProperties: false,
    },
    idempotent: true,
    limits: ['device_command'],
    responses: { 202: { description: 'Handed to the broker', schema: commandResult } },
    errors: [
      { status: 503, code: 'publish_failed', when: 'The command could not be delivered to the broker.' },
      { status: 400, code: 'validation_error', when: 'Bad channel or payload.' },
      { status: 403, code: 'forbidden', when: 'The channel is not allowed for this partner.' },
    ],
  },
  {
    method: 'GET',
    path: '/v1/meter/devices/{device_id}/intervals',
    operationId: 'listMeterIntervals',
    tag: 'Meter',
    summary: 'Interval records of a meter',
    description: 'Records oldest first, cursor-paginated.',
    permission: 'energy_read',
    target: { subject: testSubject('meter.intervals') },
    device: { product: 'meter' },
    query: {
      properties: {
        start: { type: 'string', description: 'ISO 8601 or epoch seconds.' },
        limit: { type: 'integer', minimum: 1, maximum: 1000, default: 200 },
        cursor: { type: 'string' },
      },
      required: ['start'],
    },
    responses: { 200: { description: 'A page of records', schema: { type: 'object' } } },
  },
  {
    method: 'DELETE',
    path: '/v1/devices/{device_id}',
    operationId: 'removeDevice',
    tag: 'Devices',
    summary: 'Remove a device',
    permission: 'device_removal',
    target: { subject: testSubject('registry.remove') },
    device: {},
    query: { properties: { confirm: { type: 'string' } } },
    body: { type: 'object', properties: { confirm: { type: 'string' } } },
    bodyOptional: true,
    limits: ['destructive'],
    responses: { 204: { description: 'Removed' } },
    errors: [{ status: 409, code: 'confirmation_required', when: 'confirm is missing or does not equal the device id.' }],
  },
  {
    method: 'POST',
    path: '/v1/devices/{device_id}',
    operationId: 'provisionDevice',
    tag: 'Devices',
    summary: 'Provision a device',
    permission: 'device_provisioning',
    target: { subject: testSubject('registry.provision') },
    params: { device_id: deviceIdParam },
    body: { type: 'object', required: ['credential_format'], properties: { credential_format: { type: 'string', enum: ['derived-v1'] } } },
    idempotent: true,
    responses: { 201: { description: 'Provisioned', schema: { type: 'object' }, headers: ['Location'] } },
    errors: [{ status: 409, code: 'conflict', when: 'The device id is already in use.' }],
  },
  {
    method: 'PUT',
    path: '/v1/profiles/{profile_id}',
    operationId: 'updateProfile',
    tag: 'Configuration',
    summary: 'Update an alert profile',
    permission: 'profile_manage',
    target: { subject: testSubject('config.profile.update') },
    params: { profile_id: { type: 'integer', minimum: 1 } },
    body: { type: 'object', properties: { name: { type: 'string' } } },
    limits: ['config_mutation'],
    responses: { 200: { description: 'Updated', schema: { type: 'object' } } },
    errors: [
      { status: 404, code: 'not_found', when: 'The profile is not yours.' },
      { status: 409, code: 'name_taken', when: 'The name already exists.' },
    ],
  },
  {
    method: 'GET',
    path: '/v1/legacy/things',
    operationId: 'listLegacyThings',
    tag: 'Devices',
    summary: 'A deprecated listing',
    permission: null,
    target: { subject: testSubject('registry.legacy') },
    responses: { 200: { description: 'Things', schema: { type: 'object' } } },
    deprecated: { sunset: '2027-06-01', link: 'https://example.invalid/deprecations/things' },
  },
];

// Real rows replace synthetic ones for the same route once the owning service adds them.
const allRoutes = [...tableRoutes, ...synthetic.filter((s) => !tableRoutes.some((t) => t.method === s.method && t.path === s.path))];
const doc = buildOpenApiDocument(allRoutes);

const obj = (value: unknown): Json => {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`expected an object, got ${JSON.stringify(value)}`);
  return value as Json;
};
const operation = (path: string, method: string): Json => obj(obj(obj(doc.paths)[path])[method]);
const responses = (op: Json): Json => obj(op.responses);
const statuses = (op: Json): number[] => Object.keys(responses(op)).map(Number);
const codesAt = (op: Json, status: number): unknown => obj(responses(op)[String(status)])['x-error-codes'];
const headerNames = (op: Json, status: number): string[] => Object.keys(obj(obj(responses(op)[String(status)]).headers));
const components = obj(doc.components);

/** Resolves a local `#/components/...` reference. */
function deref(value: unknown): Json {
  const o = obj(value);
  if (typeof o.$ref !== 'string') return o;
  let cur: unknown = doc;
  for (const part of o.$ref.replace(/^#\//, '').split('/')) cur = obj(cur)[part];
  return obj(cur);
}

describe('buildOpenApiDocument', () => {
  it('is a valid OpenAPI 3.1 document (schema validation and $ref resolution)', async () => {
    await expect(SwaggerParser.validate(structuredClone(doc) as never, { resolve: { external: false } })).resolves.toBeDefined();
    // The table alone is valid too, and so is a document with a server URL.
    await expect(
      SwaggerParser.validate(structuredClone(buildOpenApiDocument(tableRoutes, { serverUrl: 'https://api.example.test' })) as never, {
        resolve: { external: false },
      }),
    ).resolves.toBeDefined();
    // The validator does reject a broken 3.1 document.
    const broken = structuredClone(doc);
    delete obj(broken.info).version;
    obj(obj(obj(broken.paths)['/v1/account']).get).bogus = true;
    await expect(SwaggerParser.validate(broken as never, { resolve: { external: false } })).rejects.toThrow(/version|unevaluated/);
  });

  it('declares version, title, servers and the global bearer scheme', () => {
    expect(doc.openapi).toBe('3.1.0');
    const info = obj(doc.info);
    expect(info.version).toBe('1.0.0');
    expect(info.title).toEqual(expect.any(String));
    expect(info.description).toEqual(expect.stringContaining('Idempotency'));
    expect(doc.servers).toEqual([expect.objectContaining({ url: '/' })]);
    expect(buildOpenApiDocument(tableRoutes, { serverUrl: 'https://api.example.test' }).servers).toEqual([
      expect.objectContaining({ url: 'https://api.example.test' }),
    ]);
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect(obj(components.securitySchemes).bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(obj(components.schemas).Error).toEqual(errorSchema);
    expect(Object.keys(obj(components.headers))).toEqual(
      expect.arrayContaining(['X-Request-Id', 'Cache-Control', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After', 'Location', 'Idempotent-Replayed', 'WWW-Authenticate']),
    );
    // Tags follow the table's order of first appearance.
    expect(doc.tags).toEqual([...new Set(allRoutes.map((r) => r.tag))].map((name) => ({ name })));
    expect((doc.tags as { name: string }[]).map((t) => t.name)).toEqual(expect.arrayContaining(['Account', 'Light commands', 'Meter', 'Devices', 'Configuration', 'System']));
  });

  it('describes every route as an operation with a unique operationId, tag, permission and path parameters', () => {
    const ids = new Set<string>();
    for (const route of allRoutes) {
      const op = operation(route.path, route.method.toLowerCase());
      expect(op.operationId).toBe(route.operationId);
      expect(ids.has(route.operationId)).toBe(false);
      ids.add(route.operationId);
      expect(op.tags).toEqual([route.tag]);
      expect(op.summary).toBe(route.summary);
      expect(op['x-required-permission']).toEqual(route.permission);
      const named = route.permission === null ? ['**Permission:** none'] : typeof route.permission === 'string' ? [`\`${route.permission}\``] : route.permission.map((p) => `\`${p}\``);
      for (const text of named) expect(op.description).toEqual(expect.stringContaining(text));
      expect(op.security).toBeUndefined(); // all /v1: the global bearer requirement applies

      const params = ((op.parameters as unknown[] | undefined) ?? []).map(deref);
      const inPath = [...route.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      expect(params.filter((p) => p.in === 'path').map((p) => p.name)).toEqual(inPath);
      for (const p of params.filter((q) => q.in === 'path')) expect(p.required).toBe(true);

      for (const [status, response] of Object.entries(responses(op))) {
        const r = obj(response);
        expect(obj(r.headers)['X-Request-Id']).toEqual({ $ref: '#/components/headers/X-Request-Id' });
        expect(obj(r.headers)['Cache-Control']).toEqual({ $ref: '#/components/headers/Cache-Control' });
        if (Number(status) >= 400) {
          expect(obj(obj(r.content)['application/json']).schema).toEqual({ $ref: '#/components/schemas/Error' });
          const codes = r['x-error-codes'] as string[];
          expect(codes.length).toBeGreaterThan(0);
          for (const code of codes) expect(r.description).toEqual(expect.stringContaining(`\`${code}\``));
        }
      }
    }
  });

  it('derives only the shared errors for the account route', () => {
    const op = operation('/v1/account', 'get');
    expect(statuses(op)).toEqual([200, 400, 401, 429, 500, 503]);
    // A route without parameters still refuses a query string it does not take.
    expect(obj(responses(op)['400']).description).toEqual(expect.stringContaining('query parameter (the route takes none)'));
    expect(codesAt(op, 401)).toEqual(['unauthorized']);
    expect(codesAt(op, 429)).toEqual(['rate_limited']);
    expect(codesAt(op, 500)).toEqual(['internal_error']);
    expect(codesAt(op, 503)).toEqual(['service_unavailable']);
    expect(headerNames(op, 401)).toEqual(expect.arrayContaining(['WWW-Authenticate']));
    expect(headerNames(op, 401)).not.toContain('RateLimit-Limit');
    expect(headerNames(op, 429)).toEqual(expect.arrayContaining(['Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']));
    expect(headerNames(op, 503)).toContain('Retry-After');
    expect(headerNames(op, 200)).toEqual(['X-Request-Id', 'Cache-Control', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']);
    expect(op.parameters).toBeUndefined();
    expect(op.requestBody).toBeUndefined();
    expect(op.deprecated).toBeUndefined();
  });

  it('derives device, body, idempotency and limit errors for a light command route', () => {
    const op = operation('/v1/devices/{device_id}/commands', 'post');
    expect(statuses(op)).toEqual([202, 400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503]);
    expect(codesAt(op, 400)).toEqual(['validation_error']);
    expect(codesAt(op, 403)).toEqual(['forbidden']);
    expect(codesAt(op, 404)).toEqual(['not_found']);
    expect(codesAt(op, 409)).toEqual(['idempotency_in_progress']);
    expect(codesAt(op, 413)).toEqual(['payload_too_large']);
    expect(codesAt(op, 415)).toEqual(['unsupported_media_type']);
    expect(codesAt(op, 422)).toEqual(['idempotency_key_reused']);
    expect(codesAt(op, 503)).toEqual(['service_unavailable', 'publish_failed']);
    expect(headerNames(op, 409)).toContain('Retry-After');
    // The route's own wording replaces the derived one.
    expect(obj(responses(op)['400']).description).toEqual(expect.stringContaining('Bad channel or payload.'));
    expect(obj(responses(op)['404']).description).toEqual(expect.stringContaining('is not a `light`'));
    expect(obj(responses(op)['429']).description).toEqual(expect.stringContaining('per-device command limit'));
    // Two refusals share the code: the missing permission names it, a channel not allowed names none.
    const examples = obj(obj(obj(obj(responses(op)['403']).content)['application/json']).examples);
    expect(obj(obj(examples.forbidden).value).required_permission).toBe('raw_commands');
    expect(obj(examples.forbidden_2).value).toEqual(expect.objectContaining({ code: 'forbidden', error: expect.stringContaining('may not command this channel') }));
    expect(obj(obj(examples.forbidden_2).value).required_permission).toBeUndefined();
    expect(obj(responses(op)['403']).description).toEqual(expect.stringMatching(/lacks the `raw_commands` permission[\s\S]*may not command this channel/));
    expect(op['x-limit-classes']).toEqual(['device_command']);

    const params = (op.parameters as unknown[]).map(deref);
    expect(params.map((p) => [p.in, p.name])).toEqual([
      ['path', 'device_id'],
      ['header', 'Idempotency-Key'],
    ]);
    expect(params[0]?.schema).toEqual(deviceIdParam);
    const key = params[1] as Json;
    expect(key.required).toBe(false);
    expect(key.schema).toMatchObject({ type: 'string', minLength: 1, maxLength: 255 });
    const pattern = new RegExp(String(obj(key.schema).pattern));
    expect(pattern.test('a')).toBe(true);
    expect(pattern.test('order-1234:retry~!')).toBe(true);
    expect(pattern.test('x'.repeat(255))).toBe(true);
    expect(pattern.test('x'.repeat(256))).toBe(false);
    expect(pattern.test('')).toBe(false);
    expect(pattern.test('has space')).toBe(false);
    expect(pattern.test('tab\there')).toBe(false);
    expect(pattern.test('del\x7f')).toBe(false);
    expect(pattern.test('é')).toBe(false);

    expect(op.requestBody).toMatchObject({ required: true, content: { 'application/json': { schema: { required: ['channel', 'payload'] } } } });
    expect(headerNames(op, 202)).toContain('Idempotent-Replayed');
    expect(op.description).toEqual(expect.stringContaining('Idempotency-Key'));
  });

  it('derives query validation and meter scoping for a query route', () => {
    const op = operation('/v1/meter/devices/{device_id}/intervals', 'get');
    expect(statuses(op)).toEqual([200, 400, 401, 403, 404, 429, 500, 503]);
    expect(codesAt(op, 404)).toEqual(['not_found']);
    expect(obj(responses(op)['404']).description).toEqual(expect.stringContaining('is not a `meter`'));
    const params = (op.parameters as unknown[]).map(deref);
    expect(params.map((p) => [p.in, p.name, p.required])).toEqual([
      ['path', 'device_id', true],
      ['query', 'start', false],
      ['query', 'end', false],
      ['query', 'received_since', false],
      ['query', 'limit', false],
      ['query', 'cursor', false],
      ['query', 'unknown_time', false],
    ]);
    // device_id falls back to the shared schema when the route names a device without params.
    expect(params[0]?.schema).toEqual(deviceIdParam);
    expect(params[1]?.description).toEqual(expect.stringContaining('ISO 8601 date-time'));
    expect(op.description).toEqual(expect.stringMatching(/^By start time/));
    expect(op.requestBody).toBeUndefined();
  });

  it('handles an optional body, a destructive limit and a 204 without content', () => {
    const op = operation('/v1/devices/{device_id}', 'delete');
    expect(statuses(op)).toEqual([204, 400, 401, 403, 404, 409, 413, 415, 429, 500, 503]);
    expect(codesAt(op, 409)).toEqual(['confirmation_required']);
    expect(headerNames(op, 409)).not.toContain('Retry-After');
    expect(obj(responses(op)['204']).content).toBeUndefined();
    expect(obj(op.requestBody).required).toBe(false);
    expect(op['x-limit-classes']).toEqual(['destructive']);
    expect(obj(responses(op)['429']).description).toEqual(expect.stringContaining('destructive-operation ceiling'));
    expect(((op.parameters as unknown[]) ?? []).map(deref).map((p) => p.name)).not.toContain('Idempotency-Key');
  });

  it('merges route errors into derived statuses and adds Location on creation', () => {
    const provision = operation('/v1/devices/{device_id}', 'post');
    expect(codesAt(provision, 409)).toEqual(['idempotency_in_progress', 'conflict']);
    expect(statuses(provision)).not.toContain(404); // no `device`: provisioning names a new id
    expect(headerNames(provision, 201)).toEqual(expect.arrayContaining(['Location', 'Idempotent-Replayed']));

    const update = operation('/v1/profiles/{profile_id}', 'put');
    expect(statuses(update)).toEqual([200, 400, 401, 403, 404, 409, 413, 415, 429, 500, 503]);
    expect(codesAt(update, 404)).toEqual(['not_found']);
    expect(codesAt(update, 409)).toEqual(['name_taken']);
    expect(obj(responses(update)['429']).description).toEqual(expect.stringContaining('configuration mutation throttle'));
    expect(((update.parameters as unknown[]) ?? []).map(deref)[0]).toMatchObject({ in: 'path', name: 'profile_id', schema: { type: 'integer' } });
  });

  it('marks deprecated operations and their deprecation headers', () => {
    const op = operation('/v1/legacy/things', 'get');
    expect(op.deprecated).toBe(true);
    expect(op['x-sunset']).toBe('2027-06-01');
    expect(headerNames(op, 200)).toEqual(expect.arrayContaining(['Deprecation', 'Sunset', 'Link']));
    expect(op.description).toEqual(expect.stringContaining('2027-06-01'));
    expect(statuses(op)).toEqual([200, 400, 401, 429, 500, 503]);
    expect(operation('/v1/account', 'get').deprecated).toBeUndefined();
  });

  it('is deterministic and independent of table order', () => {
    expect(JSON.stringify(buildOpenApiDocument(allRoutes))).toBe(JSON.stringify(doc));
    const reversed = buildOpenApiDocument([...allRoutes].reverse());
    expect(JSON.stringify(reversed.paths)).toBe(JSON.stringify(doc.paths));
    expect(Object.keys(obj(doc.paths))).toEqual([...Object.keys(obj(doc.paths))].sort());
    expect(Object.keys(obj(obj(doc.paths)['/v1/devices/{device_id}']))).toEqual(['get', 'post', 'delete']);
    expect(JSON.parse(JSON.stringify(doc))).toEqual(doc);
  });

  it('does not share schema objects with the route table', () => {
    const fresh = buildOpenApiDocument(synthetic);
    const body = obj(obj(obj(obj(obj(obj(fresh.paths)['/v1/devices/{device_id}/commands']).post).requestBody).content)['application/json']).schema;
    obj(body).mutated = true;
    expect((synthetic[0]?.body as Json).mutated).toBeUndefined();
  });

  it('refuses a table it cannot describe', () => {
    const base = synthetic[4] as RouteDef;
    expect(() => buildOpenApiDocument([base, { ...base, path: '/v1/other/{profile_id}' }])).toThrow(/duplicate operationId/);
    expect(() => buildOpenApiDocument([base, { ...base, operationId: 'other' }])).toThrow(/duplicate route/);
    expect(() => buildOpenApiDocument([{ ...base, params: {} }])).toThrow(/profile_id/);
    expect(() => buildOpenApiDocument([{ ...base, params: { profile_id: { type: 'integer' }, extra: { type: 'string' } } }])).toThrow(/extra/);
  });

  it('names the permission that lifts a route’s own 403 only where one does, and the body errors of routes that take none', () => {
    const publish = operation('/v1/system/mqtt/messages', 'post');
    const examples = obj(obj(obj(obj(responses(publish)['403']).content)['application/json']).examples);
    expect(Object.values(examples).map((e) => obj(obj(e).value).required_permission)).toEqual(['raw_mqtt_global', 'raw_mqtt_global']);
    expect(codesAt(publish, 403)).toEqual(['forbidden']);
    const deleteFile = operation('/v1/system/files', 'delete');
    const fileExamples = Object.values(obj(obj(obj(obj(responses(deleteFile)['403']).content)['application/json']).examples)).map((e) => obj(obj(e).value));
    expect(fileExamples.map((v) => v.required_permission)).toEqual([expect.any(String), undefined]);
    // A bodiless POST still reads what is sent: a body with fields is 400, one not JSON is 415.
    const report = operation('/v1/meter/devices/{device_id}/report', 'post');
    expect(statuses(report)).toEqual(expect.arrayContaining([400, 413, 415]));
    expect(obj(responses(report)['400']).description).toEqual(expect.stringContaining('the route takes none: send none, or `{}`'));
    // A settings write's acknowledgement names its key.
    const setting = operation('/v1/devices/{device_id}/system/settings/{key}', 'put');
    expect(obj(obj(obj(obj(responses(setting)['202']).content)['application/json']).schema).required).toEqual(expect.arrayContaining(['key', 'command']));
  });

  it('exposes the derived errors per route', () => {
    expect(deriveErrors(tableRoutes[0] as RouteDef).map((e) => `${e.status} ${e.code}`)).toEqual([
      '400 validation_error',
      '401 unauthorized',
      '429 rate_limited',
      '500 internal_error',
      '503 service_unavailable',
    ]);
  });
});

describe('push events in the document', () => {
  const webhooks = obj(doc.webhooks);
  const parameter = (ref: unknown): Json => deref(ref);

  it('has one webhook per catalog type plus the test event, each a POST of the envelope with its type and data', () => {
    expect(Object.keys(webhooks)).toEqual([...PARTNER_EVENT_TYPES, WEBHOOK_TEST_TYPE]);
    const ids = new Set<string>();
    const allOperationIds = new Set(allRoutes.map((r) => r.operationId));
    for (const type of [...PARTNER_EVENT_TYPES, WEBHOOK_TEST_TYPE]) {
      const item = obj(webhooks[type]);
      expect(Object.keys(item)).toEqual(['post']);
      const post = obj(item.post);
      const id = String(post.operationId);
      expect(ids.has(id) || allOperationIds.has(id)).toBe(false);
      ids.add(id);
      expect(post.tags).toEqual(['Events']);
      expect(post.security).toEqual([]);

      const schema = obj(obj(obj(obj(post.requestBody).content)['application/json']).schema);
      expect(schema.required).toEqual(['id', 'type', 'version', 'occurred_at', 'data']);
      const properties = obj(schema.properties);
      expect(obj(properties.type).const).toBe(type);
      expect(obj(properties.version).const).toBe(1);
      expect(obj(properties.id).pattern).toBe('^evt_[0-9a-f]{32}$');
      expect(obj(properties.occurred_at).format).toBe('date-time');
      expect(obj(properties.device_id).pattern).toBe('^[0-9A-F]{12}$');
      if (type !== WEBHOOK_TEST_TYPE) expect(properties.data).toEqual(describePartnerEvent(type as (typeof PARTNER_EVENT_TYPES)[number]).data);

      // The Standard Webhooks headers, documented.
      const headers = (post.parameters as unknown[]).map(parameter);
      expect(headers.map((h) => [h.name, h.in, h.required])).toEqual([
        ['webhook-id', 'header', true],
        ['webhook-timestamp', 'header', true],
        ['webhook-signature', 'header', true],
      ]);
      const signature = String(headers[2]?.description);
      expect(signature).toContain('`v1,');
      expect(signature).toContain('HMAC-SHA256');
      expect(signature).toContain('<webhook-id>.<webhook-timestamp>.<body>');
      expect(signature).toContain('whsec_');
      expect(signature).toContain('space-separated');

      // A 2xx means received.
      expect(Object.keys(obj(post.responses))).toEqual(['2XX']);
      expect(String(obj(obj(post.responses)['2XX']).description)).toMatch(/^Received/);
    }
  });

  it('names the permission each type needs in its description', () => {
    for (const type of PARTNER_EVENT_TYPES) {
      const post = obj(obj(webhooks[type]).post);
      const permission = permissionToReceive(type);
      expect(post['x-required-permission']).toBe(permission);
      expect(String(post.description)).toContain(describePartnerEvent(type).description);
      expect(String(post.description)).toContain(permission === null ? '**Permission to receive:** none beyond the device being in your scope' : `**Permission to receive:** \`${permission}\``);
    }
    expect(String(obj(obj(webhooks[WEBHOOK_TEST_TYPE]).post).description)).toContain('POST /v1/webhooks/{webhook_id}/test');
  });

  it('describes the live stream’s 200 as text/event-stream, with Last-Event-ID, the filters and its refusals', () => {
    const op = operation('/v1/events', 'get');
    expect(op['x-required-permission']).toBe('events_read');
    expect(statuses(op)).toEqual([200, 400, 401, 403, 404, 429, 500, 503]);
    const ok = obj(responses(op)['200']);
    expect(Object.keys(obj(ok.content))).toEqual(['text/event-stream']);
    const media = obj(obj(ok.content)['text/event-stream']);
    expect(obj(media.schema).type).toBe('string');
    expect(String(media.example)).toMatch(/^id: \d+\nevent: device\.connected\ndata: \{/);
    expect(headerNames(op, 200)).toEqual(expect.arrayContaining(['X-Request-Id', 'Cache-Control', 'RateLimit-Limit', 'X-Accel-Buffering']));
    const params = (op.parameters as unknown[]).map(deref);
    expect(params.map((p) => [p.in, p.name])).toEqual([
      ['query', 'types'],
      ['query', 'device_id'],
      ['query', 'last_event_id'],
      ['header', 'Last-Event-ID'],
    ]);
    const types = new RegExp(String(obj(params[0]?.schema).pattern));
    expect(types.test(PARTNER_EVENT_TYPES.join(','))).toBe(true);
    expect(types.test('device.connected')).toBe(true);
    expect(types.test('device.connected,nope.nope')).toBe(false);
    expect(types.test(WEBHOOK_TEST_TYPE)).toBe(false);
    expect(codesAt(op, 404)).toEqual(['not_found']);
    expect(String(obj(responses(op)['429']).description)).toContain('5 open streams');
    expect(String(op.description)).toContain('**Streaming:**');
    expect(obj(obj(components.headers)['Cache-Control']).schema).toEqual({ type: 'string', enum: ['no-store'] });
  });

  it('documents the webhook routes: webhook_manage, Location on creation, limit_reached, not_found for another partner’s id', () => {
    const rows = tableRoutes.filter((r) => r.path.startsWith('/v1/webhooks'));
    expect(rows.map((r) => `${r.method} ${r.path}`).sort()).toEqual(
      [
        'POST /v1/webhooks',
        'GET /v1/webhooks',
        'GET /v1/webhooks/{webhook_id}',
        'PATCH /v1/webhooks/{webhook_id}',
        'DELETE /v1/webhooks/{webhook_id}',
        'POST /v1/webhooks/{webhook_id}/rotate-secret',
        'POST /v1/webhooks/{webhook_id}/test',
        'GET /v1/webhooks/{webhook_id}/deliveries',
        'POST /v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver',
      ].sort(),
    );
    for (const r of rows) {
      expect(r.permission).toBe('webhook_manage');
      expect(r.tag).toBe('Events');
      if (r.path.includes('{webhook_id}')) expect(codesAt(operation(r.path, r.method.toLowerCase()), 404)).toEqual(['not_found']);
    }
    const create = operation('/v1/webhooks', 'post');
    expect(statuses(create)).toEqual([201, 400, 401, 403, 409, 413, 415, 422, 429, 500, 503]);
    expect(headerNames(create, 201)).toEqual(expect.arrayContaining(['Location', 'Idempotent-Replayed']));
    expect(codesAt(create, 403)).toEqual(['forbidden', 'limit_reached']);
    expect(obj(obj(obj(obj(responses(create)['201']).content)['application/json']).schema).required).toContain('secret');
    const body = obj(obj(obj(obj(create.requestBody).content)['application/json']).schema);
    expect(body.required).toEqual(['url', 'event_types']);
    expect(obj(obj(body.properties).url)).toMatchObject({ type: 'string', format: 'uri', maxLength: 2048 });
    expect(obj(obj(obj(body.properties).event_types).items).enum).toEqual([...PARTNER_EVENT_TYPES]);
    const rotate = operation('/v1/webhooks/{webhook_id}/rotate-secret', 'post');
    expect(obj(rotate.requestBody).required).toBe(false);
    expect(statuses(operation('/v1/webhooks/{webhook_id}', 'delete'))).toContain(204);
    const redeliver = operation('/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver', 'post');
    expect(((redeliver.parameters as unknown[]) ?? []).map(deref).map((p) => [p.name, obj(p.schema).pattern])).toEqual([
      ['webhook_id', '^wh_[0-9a-f]{32}$'],
      ['delivery_id', '^dlv_[0-9a-f]{32}$'],
    ]);
    const deliveries = obj(obj(obj(obj(obj(responses(operation('/v1/webhooks/{webhook_id}/deliveries', 'get'))['200']).content)['application/json']).schema).properties);
    const delivery = obj(obj(deliveries.deliveries).items);
    expect(delivery.required).toEqual(['id', 'webhook_id', 'event_id', 'event_type', 'device_id', 'state', 'attempts', 'next_attempt_at', 'last_attempt', 'created_at', 'delivered_at', 'event']);
    expect(obj(deliveries.next_cursor).type).toEqual(['string', 'null']);
  });
});
