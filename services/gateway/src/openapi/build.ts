import { describePartnerEvent, PARTNER_EVENT_TYPES, permissionToReceive, WEBHOOK_TEST_TYPE } from '@fleet/contracts';
import { MAX_BODY_DEPTH } from '../http/request-validation';
import { LIMIT_CLASSES, type LimitClass } from '../limits/classes';
import { MAX_OPEN_STREAMS, MAX_WEBHOOKS, partnerEventSchema, WEBHOOK_ID_PATTERN } from '../routes/events';
import { deviceIdParam, errorSchema, STREAM_POSITION_PATTERN, TIME_RANGE_TEXT } from '../routes/schemas';
import { pathParamNames, type ErrorSpec, type HttpMethod, type JsonSchema, type ResponseSpec, type RouteDef } from '../routes/types';
import { ERROR_CODES, LIMIT_CLASS_INFO } from './reference';

export const OPENAPI_VERSION = '3.1.0';
/** The version of the description document (the API itself is `v1`, in the path). */
export const API_DOCUMENT_VERSION = '1.0.0';
export const API_TITLE = 'Partner Device API';

export interface BuildOptions {
  /** The `servers[0].url`; default "/" (the origin that served the document). */
  serverUrl?: string;
}

const METHOD_ORDER: readonly HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

const STATUS_TEXT: Readonly<Record<number, string>> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No content',
  400: 'Bad request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not found',
  405: 'Method not allowed',
  409: 'Conflict',
  413: 'Content too large',
  415: 'Unsupported media type',
  422: 'Unprocessable content',
  429: 'Too many requests',
  500: 'Internal error',
  503: 'Service unavailable',
};

const EXAMPLE_REQUEST_ID = 'req_Vb3kQ9xT2mLp7Rw1';

/** Header components; responses reference them by name. */
const HEADER_COMPONENTS: Readonly<Record<string, Record<string, unknown>>> = {
  'X-Request-Id': {
    description: 'Identifies this request; the same value as `request_id` in an error body. Quote it when contacting support.',
    required: true,
    schema: { type: 'string' },
  },
  'Cache-Control': {
    description: '`no-store`, on the live event stream (`GET /v1/events`) too.',
    required: true,
    schema: { type: 'string', enum: ['no-store'] },
  },
  'RateLimit-Limit': {
    description: 'Your per-partner request limit per minute (account `rate_limits.requests_per_min`). Sent on every response to an authenticated request.',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Remaining': {
    description: 'Requests the current minute still admits. 0 on a 429 from the per-partner request limit.',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Reset': {
    description: 'Seconds until the oldest counted request leaves the minute.',
    schema: { type: 'integer', minimum: 0 },
  },
  'Retry-After': {
    description: 'Seconds to wait before retrying. Sent on 429, on 409 `idempotency_in_progress` and on 503.',
    schema: { type: 'integer', minimum: 0 },
  },
  Location: {
    description: 'Names what was created, or what to poll.',
    schema: { type: 'string', format: 'uri-reference' },
  },
  'Idempotent-Replayed': {
    description: '`true` when this is the stored first response to an earlier request with the same `Idempotency-Key`; nothing was redone.',
    schema: { type: 'string', enum: ['true'] },
  },
  'WWW-Authenticate': {
    description: '`Bearer realm="…"` (RFC 6750), with `error="invalid_token"` when a bearer key was sent (none for another scheme or an empty `Bearer`).',
    schema: { type: 'string' },
  },
  Deprecation: {
    description: 'Present because the request used a deprecated feature.',
    schema: { type: 'string' },
  },
  Sunset: {
    description: 'When the deprecated feature will be removed (HTTP date).',
    schema: { type: 'string' },
  },
  Link: {
    description: 'Points to the deprecation notice (`rel="deprecation"`).',
    schema: { type: 'string' },
  },
  'X-Accel-Buffering': {
    description: '`no`: proxies on the way must pass the stream on as it comes, never buffer it.',
    schema: { type: 'string', enum: ['no'] },
  },
};

const COMMON_HEADERS = ['X-Request-Id', 'Cache-Control'] as const;
const RATE_LIMIT_HEADERS = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'] as const;
const DEPRECATION_HEADERS = ['Deprecation', 'Sunset', 'Link'] as const;

const idempotencyKeyParameter = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes a retry safe. Printable ASCII (0x21–0x7E), 1–255 characters, scoped to your account and this route. ' +
    'The same request with the same key within 24 hours returns the first response again with `Idempotent-Replayed: true` and redoes nothing. ' +
    'The same key with a different request is 422 `idempotency_key_reused`; a repeat while the first still runs is 409 `idempotency_in_progress` with `Retry-After`. ' +
    'Only 2xx responses are kept: after a failure the same key runs again.',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7E]{1,255}$' },
};

/** The `Last-Event-ID` request header of a stream route. */
const lastEventIdParameter = {
  name: 'Last-Event-ID',
  in: 'header',
  required: false,
  description: 'Resume after this stream position: the `id:` of the last event you received (an EventSource sends it by itself when it reconnects). Wins over the `last_event_id` query parameter.',
  schema: { type: 'string', pattern: STREAM_POSITION_PATTERN },
};

/** The headers of every webhook delivery (Standard Webhooks). */
const WEBHOOK_HEADER_PARAMETERS: Readonly<Record<string, Record<string, unknown>>> = {
  WebhookId: {
    name: 'webhook-id',
    in: 'header',
    required: true,
    description: 'The event’s `id` (`evt_…`): the same on every attempt and redelivery. Deliveries are at least once: deduplicate on it.',
    schema: { type: 'string' },
  },
  WebhookTimestamp: {
    name: 'webhook-timestamp',
    in: 'header',
    required: true,
    description: 'When this attempt was signed, in Unix seconds. Refuse a delivery whose timestamp is far from your clock (the `standardwebhooks` package allows 5 minutes) to stop replays.',
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
  WebhookSignature: {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    description:
      '`v1,<signature>`: the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` (the body exactly as received), keyed with the bytes of the base64 part of your secret after `whsec_`. ' +
      'While a rotated secret still signs, several space-separated signatures are sent: accept the delivery when any one matches. Compare in constant time.',
    schema: { type: 'string' },
  },
};

const API_DESCRIPTION = `A partner-facing HTTP API for operating notification lights and energy meters: devices, light commands and effects, configuration, system and file tooling, meter data, and push events (webhooks and a live stream).

All requests and responses are JSON objects; HTTPS is mandatory. Every route is under \`/v1\` and needs a bearer API key issued by service staff: \`Authorization: Bearer <API_KEY>\`. A quick-start guide is served at \`/docs\` and the list of changes at \`/changelog\`.

## Responses

Every \`/v1\` response carries \`X-Request-Id\` and \`Cache-Control: no-store\`; every response to an authenticated request also carries \`RateLimit-Limit\`, \`RateLimit-Remaining\` and \`RateLimit-Reset\`. 201 means created (\`Location\` names it); 202 means accepted (a command handed to the broker, or a job started; \`Location\` names what to poll when there is something to poll); 204 means done with no body. Request bodies are JSON objects sent as \`Content-Type: application/json\`. Clients must ignore fields they do not recognise.

## Requests

These rules hold on every route, before or beside each operation's own validation; they are 400 \`validation_error\` unless said otherwise:

- A body is a JSON object sent as \`Content-Type: application/json\`, with no charset or \`charset=utf-8\`; any other media type or charset is 415 \`unsupported_media_type\`. It must be valid UTF-8 and JSON, nested at most ${MAX_BODY_DEPTH} levels. An operation without a request body takes none: an empty body, or \`{}\`, is the same as none; any field is refused.
- \`Content-Encoding\` other than \`identity\` is 415 \`unsupported_media_type\`: send bodies uncompressed.
- \`Authorization\`, \`Content-Type\`, \`Content-Encoding\`, \`Content-Length\` and \`Idempotency-Key\` may each be sent once.
- No text (path, query, body values or field names) may contain U+0000 or a lone surrogate; names (device names, organizations, command names, zones) and raw light command payloads refuse every control character U+0001–U+001F and U+007F too; a raw MQTT publish's payload may hold them, except on a \`sys/exe\` topic (see that operation).
- The query string is percent-encoded UTF-8; each parameter is given once; integers are plain decimal digits (\`16\`, \`-3\`; never \`0x10\`, \`1e1\` or \`+16\`), booleans \`true\` or \`false\`.
- Every date/time query parameter takes ISO 8601 or epoch seconds within ${TIME_RANGE_TEXT}.
- A request that is not valid HTTP (bytes not allowed in the request line or a header, broken framing) is 400 \`validation_error\`; request line and headers over 16 KB are 431 \`headers_too_large\`. These answers carry the error body, \`X-Request-Id\` and \`Cache-Control: no-store\` too.

## Errors

Every error has the body \`{error, code, request_id, required_permission?}\`: \`error\` is a sentence for people and may be reworded; \`code\` is a stable word to branch on; \`request_id\` equals \`X-Request-Id\`; \`required_permission\` names the permission that would lift a 403. New codes may be added: handle an unknown code by its HTTP status. Each operation lists the codes it may answer under each status (also in the \`x-error-codes\` extension of the response). Any URL that matches no route is 404 \`unknown_route\`; a known path with another method is 405 \`method_not_allowed\`.

| HTTP | code | Meaning |
|---|---|---|
${ERROR_CODES.map((e) => `| ${e.status === 500 ? '5xx' : e.status} | \`${e.code}\` | ${e.meaning} |`).join('\n')}

## Permissions and scope

Each partner has independent boolean permissions, readable at \`GET /v1/account\`; none implies another. Each operation names the permission it needs (also in its \`x-required-permission\` extension). Permissions are checked first. A device outside your scope answers 404, exactly like a nonexistent one.

## Rate limits

Every request spends from your per-partner request limit (\`rate_limits.requests_per_min\` in \`GET /v1/account\`). Device commands, configuration mutations and destructive operations also spend from their own limits, named on each operation. Exceeding any limit is 429 \`rate_limited\` with \`Retry-After\`.

## Push events

Events about your devices come to you in two ways: **webhooks** (\`/v1/webhooks\`, permission \`webhook_manage\`: up to ${MAX_WEBHOOKS} endpoints that receive signed POSTs, described in the **webhooks** section of this document) and the **live stream** (\`GET /v1/events\`, permission \`events_read\`: Server-Sent Events, at most ${MAX_OPEN_STREAMS} open at once). You receive an event when its device was in your scope when it happened and your permissions allow its type; the webhooks section names the permission of each type.

## Idempotency

Operations that list the \`Idempotency-Key\` header accept it: see the header's description.

## Pagination

Lists that page use cursors: pass the answer's \`next_cursor\` back as \`cursor\`; \`has_more\` says whether another page waits. Cursors are opaque and URL-safe.

## Versioning

The version is \`v1\`, in the path. \`/v1\` only gains new routes, optional parameters, fields and error codes. Anything to be removed is deprecated first, with at least six months before sunset: the operation is marked deprecated here, and a response that uses it carries \`Deprecation\`, \`Sunset\` and \`Link\` (\`rel="deprecation"\`) headers.`;

const isV1 = (path: string): boolean => path === '/v1' || path.startsWith('/v1/');

const headerRef = (name: string): Record<string, unknown> =>
  name in HEADER_COMPONENTS ? { $ref: `#/components/headers/${name}` } : { description: name, schema: { type: 'string' } };

function headersFor(names: Iterable<string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of names) if (!(name in out)) out[name] = headerRef(name);
  return out;
}

const permissionsOf = (route: RouteDef): string[] => (route.permission === null ? [] : typeof route.permission === 'string' ? [route.permission] : [...route.permission]);

/** "the `a` permission", or "one of the permissions `a`, `b`". */
function permissionText(route: RouteDef): string {
  const all = permissionsOf(route).map((p) => `\`${p}\``);
  return all.length === 1 ? `the ${all[0]} permission` : `one of the permissions ${joinWords(all, 'or')}`;
}

function orderedLimits(limits: readonly LimitClass[] | undefined): LimitClass[] {
  const set = new Set(limits ?? []);
  return LIMIT_CLASSES.filter((cls) => set.has(cls));
}

/** Joins phrases as "a", "a or b", "a, b or c" (or "and"). */
function joinWords(words: string[], last: 'or' | 'and'): string {
  if (words.length <= 1) return words.join('');
  return `${words.slice(0, -1).join(', ')} ${last} ${words[words.length - 1]}`;
}

function limitText(route: RouteDef): string {
  const extra = orderedLimits(route.limits).map((cls) => `${LIMIT_CLASS_INFO[cls].phrase} (${LIMIT_CLASS_INFO[cls].rule})`);
  return joinWords(['the per-partner request limit (your account’s `rate_limits.requests_per_min`)', ...extra], 'and');
}

/**
 * The errors a route may answer: the ones derived from its definition (authentication,
 * rate limits, permission, validation, media type, device scope, idempotency, server
 * failures) plus its own `errors`. Ordered by status; a route's own entry for a derived
 * code replaces the derived wording, except a 403 `forbidden` of its own, which is another
 * refusal beside the missing permission (a channel not allowed, a protected name) and is
 * listed after it.
 */
export function deriveErrors(route: RouteDef): ErrorSpec[] {
  const derived: ErrorSpec[] = [];
  const add = (status: number, code: string, when: string, liftedBy?: string): void => {
    derived.push({ status, code, when, ...(liftedBy !== undefined ? { liftedBy } : {}) });
  };
  const v1 = isV1(route.path);
  // Every route reads a body and a query string, whether it takes them or not (request-validation.ts).
  const readsBody = v1 && !('upload' in route.target) && route.method !== 'GET';

  const validated: string[] = [];
  if (pathParamNames(route.path).length > 0) validated.push('path parameter');
  if (route.query) validated.push('query parameter (unknown parameters are refused too)');
  else if (v1) validated.push('query parameter (the route takes none)');
  if (route.body) validated.push('body (including one that is not valid JSON or not a JSON object)');
  else if (readsBody) validated.push('body (the route takes none: send none, or `{}`)');
  if (validated.length > 0) add(400, 'validation_error', `Invalid ${joinWords(validated, 'or')}.`);

  if (v1) add(401, 'unauthorized', 'The API key is missing, malformed, unknown, revoked or disabled.');

  if (route.permission !== null) {
    add(403, 'forbidden', `The key lacks ${permissionText(route)} (the body names it in \`required_permission\`).`, permissionsOf(route)[0]);
  }

  if (route.device) {
    const product = route.device.product;
    add(404, 'not_found', `The device does not exist or is outside your scope${product ? `, or is not a \`${product}\`` : ''}.`);
  }

  if (route.idempotent) add(409, 'idempotency_in_progress', 'A request with the same `Idempotency-Key` is still running; retry after `Retry-After` seconds.');
  if (route.body || readsBody) add(413, 'payload_too_large', 'The body is larger than the gateway accepts.');
  if (route.body || readsBody) add(415, 'unsupported_media_type', 'A body was sent with a media type other than `application/json`.');
  if ('upload' in route.target) add(415, 'unsupported_media_type', 'The body is not `multipart/form-data`.');
  if (route.idempotent) add(422, 'idempotency_key_reused', 'The `Idempotency-Key` was already used with a different request.');

  add(429, 'rate_limited', `A rate limit was reached. This route spends from ${limitText(route)}. Wait \`Retry-After\` seconds.`);
  add(500, 'internal_error', 'An internal failure.');
  add(
    503,
    'service_unavailable',
    !('local' in route.target)
      ? 'The service that owns this route is down, slow or failing; retry after `Retry-After` seconds.'
      : 'The service is temporarily unavailable; retry after `Retry-After` seconds.',
  );

  const own = route.errors ?? [];
  const besideDerived = (e: ErrorSpec) => e.status === 403 && e.code === 'forbidden';
  const merged: ErrorSpec[] = derived.map((d) => (besideDerived(d) ? d : (own.find((o) => o.status === d.status && o.code === d.code) ?? d)));
  for (const o of own) {
    if (besideDerived(o) || !merged.some((m) => m.status === o.status && m.code === o.code)) merged.push({ ...o });
  }
  // Stable sort: by status, keeping derived-then-own order within a status.
  return merged.map((e, i) => ({ e, i })).sort((a, b) => a.e.status - b.e.status || a.i - b.i).map(({ e }) => ({ ...e }));
}

function errorResponse(route: RouteDef, status: number, errors: ErrorSpec[]): Record<string, unknown> {
  const codes = [...new Set(errors.map((e) => e.code))];
  const headerNames: string[] = [...COMMON_HEADERS];
  if (status === 401) headerNames.push('WWW-Authenticate');
  else headerNames.push(...RATE_LIMIT_HEADERS);
  if (status === 429 || status === 503 || (status === 409 && codes.includes('idempotency_in_progress'))) headerNames.push('Retry-After');

  const examples: Record<string, unknown> = {};
  for (const e of errors) {
    const base = e.code.replace(/[^A-Za-z0-9._-]/g, '_') || 'error';
    let key = base;
    for (let n = 2; key in examples; n++) key = `${base}_${n}`;
    const value: Record<string, unknown> = { error: e.when, code: e.code, request_id: EXAMPLE_REQUEST_ID };
    if (e.liftedBy !== undefined) value.required_permission = e.liftedBy;
    const summary = e.code !== 'forbidden' ? e.code : e.liftedBy !== undefined ? `forbidden (lifted by ${e.liftedBy})` : 'forbidden (no permission lifts it)';
    examples[key] = { summary, value };
  }

  const title = STATUS_TEXT[status] ?? `HTTP ${status}`;
  return {
    description: `${title}. Error codes:\n\n${errors.map((e) => `- \`${e.code}\`: ${e.when}`).join('\n')}`,
    headers: headersFor(headerNames),
    content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' }, examples } },
    'x-error-codes': codes,
  };
}

function successResponse(route: RouteDef, status: number, spec: ResponseSpec): Record<string, unknown> {
  const headerNames: string[] = [...COMMON_HEADERS];
  if (isV1(route.path)) headerNames.push(...RATE_LIMIT_HEADERS);
  headerNames.push(...(spec.headers ?? []));
  if (route.idempotent) headerNames.push('Idempotent-Replayed');
  if (route.deprecated) headerNames.push(...DEPRECATION_HEADERS);
  const out: Record<string, unknown> = { description: spec.description, headers: headersFor(headerNames) };
  if (spec.schema && status !== 204) {
    const media: Record<string, unknown> = { schema: structuredClone(spec.schema) };
    if (spec.example !== undefined) media.example = structuredClone(spec.example);
    out.content = { [spec.contentType ?? 'application/json']: media };
  }
  return out;
}

function operationDescription(route: RouteDef): string {
  const parts: string[] = [route.description ?? route.summary];
  parts.push(
    route.permission === null
      ? '**Permission:** none; any authenticated partner may call it.'
      : `**Permission:** ${permissionText(route)}. Without it the answer is 403 \`forbidden\` with \`required_permission\`.`,
  );
  if (route.tierOf) parts.push('**Tier:** which of these permissions the request needs depends on what it asks (see the description); the destructive tier also spends from the per-hour destructive ceiling.');
  if (route.device) {
    const product = route.device.product;
    parts.push(`**Device:** \`{device_id}\` must name a device in your scope${product ? ` whose product is \`${product}\`` : ''}; otherwise 404 \`not_found\`.`);
  }
  if (route.idempotent) parts.push('**Idempotency:** accepts the `Idempotency-Key` header.');
  if ('stream' in route.target) parts.push('**Streaming:** the answer stays open and has no timeout; errors before it starts are JSON like on every route.');
  parts.push(`**Rate limits:** spends from ${limitText(route)}.`);
  if (route.deprecated) {
    parts.push(`**Deprecated:** sunset ${route.deprecated.sunset}; see ${route.deprecated.link}. Responses carry \`Deprecation\`, \`Sunset\` and \`Link\` headers.`);
  }
  return parts.join('\n\n');
}

function parameterFor(name: string, location: 'path' | 'query', schema: JsonSchema, required: boolean): Record<string, unknown> {
  const param: Record<string, unknown> = { name, in: location, required };
  if (typeof schema.description === 'string') param.description = schema.description;
  param.schema = structuredClone(schema);
  return param;
}

function buildOperation(route: RouteDef): Record<string, unknown> {
  const names = pathParamNames(route.path);
  const declared = Object.keys(route.params ?? {});
  for (const name of declared) {
    if (!names.includes(name)) throw new Error(`${route.operationId}: params.${name} is not in the path ${route.path}`);
  }

  const parameters: Record<string, unknown>[] = [];
  for (const name of names) {
    let schema = route.params?.[name];
    if (!schema && name === 'device_id' && route.device) schema = deviceIdParam;
    if (!schema) throw new Error(`${route.operationId}: path parameter {${name}} has no schema in params`);
    parameters.push(parameterFor(name, 'path', schema, true));
  }
  if (route.query) {
    const required = new Set(route.query.required ?? []);
    for (const [name, schema] of Object.entries(route.query.properties)) parameters.push(parameterFor(name, 'query', schema, required.has(name)));
  }
  if (route.idempotent) parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });
  if ('stream' in route.target) parameters.push({ $ref: '#/components/parameters/LastEventId' });

  const responses: Record<string, unknown> = {};
  const statuses = new Map<number, Record<string, unknown>>();
  for (const [key, spec] of Object.entries(route.responses)) statuses.set(Number(key), successResponse(route, Number(key), spec));
  const byStatus = new Map<number, ErrorSpec[]>();
  for (const e of deriveErrors(route)) byStatus.set(e.status, [...(byStatus.get(e.status) ?? []), e]);
  for (const [status, errors] of byStatus) {
    if (statuses.has(status)) throw new Error(`${route.operationId}: status ${status} is both a success and an error`);
    statuses.set(status, errorResponse(route, status, errors));
  }
  for (const status of [...statuses.keys()].sort((a, b) => a - b)) responses[String(status)] = statuses.get(status);

  const op: Record<string, unknown> = {
    operationId: route.operationId,
    tags: [route.tag],
    summary: route.summary,
    description: operationDescription(route),
  };
  if (route.deprecated) {
    op.deprecated = true;
    op['x-sunset'] = route.deprecated.sunset;
    op['x-deprecation-link'] = route.deprecated.link;
  }
  op['x-required-permission'] = route.permission === null || typeof route.permission === 'string' ? route.permission : [...route.permission];
  const limits = orderedLimits(route.limits);
  if (limits.length > 0) op['x-limit-classes'] = limits;
  if (parameters.length > 0) op.parameters = parameters;
  if (route.body) {
    op.requestBody = {
      required: route.bodyOptional !== true,
      description: route.bodyOptional ? 'A JSON object; may be omitted entirely.' : 'A JSON object, sent as `Content-Type: application/json`.',
      content: { 'application/json': { schema: structuredClone(route.body) } },
    };
  }
  if ('upload' in route.target) {
    op.requestBody = {
      required: true,
      description: 'A `multipart/form-data` body: the field `dir`, then the part `file` (its filename is the stored name).',
      content: {
        'multipart/form-data': {
          schema: { type: 'object', required: ['dir', 'file'], properties: { dir: { type: 'string', enum: ['files', 'firmware'] }, file: { type: 'string', format: 'binary' } } },
          encoding: { file: { contentType: 'application/octet-stream' } },
        },
      },
    };
  }
  op.responses = responses;
  if (!isV1(route.path)) op.security = [];
  return op;
}

/**
 * The OpenAPI 3.1 description of the partner API, built from the route table. Deterministic:
 * paths are sorted, methods follow GET, POST, PUT, PATCH, DELETE, tags follow the table.
 * Throws on a table the document cannot describe (duplicate route or operationId, path
 * parameters without schemas).
 */
export function buildOpenApiDocument(routes: RouteDef[], options: BuildOptions = {}): Record<string, unknown> {
  const seenRoutes = new Set<string>();
  const seenOperationIds = new Set<string>();
  for (const route of routes) {
    const id = `${route.method} ${route.path}`;
    if (seenRoutes.has(id)) throw new Error(`duplicate route ${id}`);
    if (seenOperationIds.has(route.operationId)) throw new Error(`duplicate operationId ${route.operationId}`);
    seenRoutes.add(id);
    seenOperationIds.add(route.operationId);
  }

  const tags: string[] = [];
  for (const route of routes) if (!tags.includes(route.tag)) tags.push(route.tag);

  const paths: Record<string, Record<string, unknown>> = {};
  const sorted = [...routes].sort(
    (a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0) || METHOD_ORDER.indexOf(a.method) - METHOD_ORDER.indexOf(b.method),
  );
  for (const route of sorted) {
    const item = (paths[route.path] ??= {});
    item[route.method.toLowerCase()] = buildOperation(route);
  }

  const headers: Record<string, unknown> = {};
  for (const [name, header] of Object.entries(HEADER_COMPONENTS)) headers[name] = structuredClone(header);

  return {
    openapi: OPENAPI_VERSION,
    info: { title: API_TITLE, version: API_DOCUMENT_VERSION, description: API_DESCRIPTION },
    servers: [{ url: options.serverUrl ?? '/', description: 'Partner API (HTTPS only)' }],
    security: [{ bearerAuth: [] }],
    tags: tags.map((name) => ({ name })),
    paths,
    webhooks: buildWebhooks(),
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description:
            'An API key issued by service staff, sent as `Authorization: Bearer <API_KEY>`. Keys have the form `<prefix>_<handle>_<secret>`; never put one in a URL or client-side code. ' +
            'A missing, malformed, unknown, revoked or disabled key is 401 `unauthorized` with `WWW-Authenticate`.',
        },
      },
      schemas: { Error: structuredClone(errorSchema) },
      parameters: {
        IdempotencyKey: structuredClone(idempotencyKeyParameter),
        LastEventId: structuredClone(lastEventIdParameter),
        ...structuredClone(WEBHOOK_HEADER_PARAMETERS),
      },
      headers,
    },
  };
}

/** `device.connected` → `deviceConnectedWebhook`: the operationId of a webhook entry. */
const webhookOperationId = (type: string): string =>
  `${type
    .split(/[._]/)
    .map((part, i) => (i === 0 ? part : `${part.charAt(0).toUpperCase()}${part.slice(1)}`))
    .join('')}Webhook`;

/** The data of a test event: nothing to act on. */
const TEST_EVENT_DATA = {
  type: 'object',
  required: ['webhook_id'],
  properties: { webhook_id: { type: 'string', pattern: WEBHOOK_ID_PATTERN, description: 'The endpoint the test was sent to.' } },
  description: 'Nothing to act on: a test event only shows that deliveries reach you and that your signature check works.',
};

/**
 * The OpenAPI 3.1 `webhooks` section: one POST per event type of the catalog, plus the test
 * event, as your endpoint receives it: the envelope whose `type` is the constant and whose `data`
 * is the catalog's schema, the Standard Webhooks headers, and what its answer means.
 */
function buildWebhooks(): Record<string, unknown> {
  const entry = (type: string, description: string, data: Record<string, unknown>, permission: string | null, permissionNote: string): Record<string, unknown> => ({
    post: {
      operationId: webhookOperationId(type),
      tags: ['Events'],
      summary: `${type} event`,
      description: [
        description,
        `**Permission to receive:** ${permission === null ? permissionNote : `\`${permission}\``}.`,
        '**Delivery:** POSTed as JSON to every enabled endpoint of yours that subscribes to the type, signed with the endpoint’s secret (check `webhook-signature` before trusting the body). ' +
          'Answer 2xx within 10 seconds; anything else, a redirect included, is a failure, retried up to 11 attempts in about 2.6 days. Deliveries are at least once and, per endpoint, in order for one device: deduplicate on `webhook-id`.',
      ].join('\n\n'),
      parameters: Object.keys(WEBHOOK_HEADER_PARAMETERS).map((name) => ({ $ref: `#/components/parameters/${name}` })),
      requestBody: {
        required: true,
        description: 'The event, as `Content-Type: application/json`.',
        content: { 'application/json': { schema: partnerEventSchema({ type: 'string', const: type }, data) } },
      },
      responses: {
        '2XX': { description: 'Received: the delivery succeeded and is not sent again. Answer quickly and do slow work afterwards.' },
      },
      security: [],
      'x-required-permission': permission,
    },
  });
  const out: Record<string, unknown> = {};
  for (const type of PARTNER_EVENT_TYPES) {
    const { description, data } = describePartnerEvent(type);
    out[type] = entry(type, description, data, permissionToReceive(type), 'none beyond the device being in your scope');
  }
  out[WEBHOOK_TEST_TYPE] = entry(
    WEBHOOK_TEST_TYPE,
    `Sent to one endpoint when you ask for it (\`POST /v1/webhooks/{webhook_id}/test\`), whatever types it subscribes to. It has no \`device_id\`.`,
    TEST_EVENT_DATA,
    null,
    'none (you ask for it with `webhook_manage`)',
  );
  return out;
}
