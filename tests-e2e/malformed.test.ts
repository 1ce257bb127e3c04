import net from 'node:net';
import fc from 'fast-check';
import { randomDeviceId } from '@fleet/test-kit';
import { routes } from '../services/gateway/src/routes/table';
import { pathParamNames, type JsonSchema, type RouteDef } from '../services/gateway/src/routes/types';
import { api, partnerWithKey } from './support/api';
import { e2eFleet } from './support/fleet-env';
import { mp3, uploadPlatformFile } from './support/platform-files';
import { DEVICE_ID_PATTERN } from '@fleet/device-protocol';

/**
 * Malformed requests against the whole fleet, generated from the gateway's route table: every
 * route, its path, query and body schemas, with wrong types, missing and extra fields, numbers out
 * of range, huge strings, control characters, bad dates, bad JSON, odd media types, Content-Encoding,
 * repeated headers, bad Idempotency-Keys, bad path parameters, unknown query parameters, and bytes
 * Node's HTTP parser refuses. Devices of both products exist, so requests reach the services.
 *
 * Every answer must be below 500, and every 4xx must carry the error body with `request_id`
 * equal to X-Request-Id. fast-check runs batches of CONCURRENCY requests at once; a failure
 * prints the seed and path: rerun with MALFORMED_SEED=<seed> MALFORMED_PATH=<path>.
 */

const CONCURRENCY = 16;
const REQUESTS = Number(process.env.MALFORMED_REQUESTS ?? 12_288);
const SEED = process.env.MALFORMED_SEED !== undefined ? Number(process.env.MALFORMED_SEED) : Math.floor(Math.random() * 2 ** 31);

jest.setTimeout(170_000);

// ---------------------------------------------------------------------------------------
// A raw HTTP/1.1 client: any bytes in the request line and headers, headers repeated, any body.

interface WireRequest {
  /** What the request is for, in a failure report. */
  route: string;
  method: string;
  /** Path and query as sent; characters U+0080–U+00FF go out as single bytes. */
  target: string;
  headers: Array<[string, string]>;
  body?: Buffer;
  /** Bytes sent as they are instead of the request above (for what the HTTP parser refuses). */
  raw?: Buffer;
}

interface WireAnswer {
  status: number;
  headers: Map<string, string>;
  text: string;
}

function serialize(req: WireRequest): Buffer {
  if (req.raw) return req.raw;
  const lines = [`${req.method} ${req.target} HTTP/1.1`, 'Host: 127.0.0.1'];
  for (const [name, value] of req.headers) lines.push(`${name}: ${value}`);
  if (req.body && !req.headers.some(([n]) => n.toLowerCase() === 'content-length')) lines.push(`Content-Length: ${req.body.length}`);
  lines.push('Connection: close');
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), req.body ?? Buffer.alloc(0)]);
}

function parseAnswer(received: Buffer): WireAnswer | undefined {
  let bytes = received;
  let end = bytes.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  // Interim answers (100 Continue) come before the real one.
  while (/^HTTP\/1\.[01] 1\d\d/.test(bytes.subarray(0, 16).toString('latin1'))) {
    bytes = bytes.subarray(end + 4);
    end = bytes.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
  }
  const [statusLine = '', ...lines] = bytes.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]);
  if (!Number.isInteger(status)) return undefined;
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!headers.has(name)) headers.set(name, line.slice(colon + 1).trim());
  }
  let body = bytes.subarray(end + 4);
  if (headers.get('transfer-encoding')?.toLowerCase() === 'chunked') {
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const lineEnd = body.indexOf('\r\n', at);
      if (lineEnd < 0) break;
      const size = parseInt(body.subarray(at, lineEnd).toString('latin1'), 16);
      if (!(size > 0)) break;
      parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
    body = Buffer.concat(parts);
  } else if (headers.has('content-length')) {
    body = body.subarray(0, Number(headers.get('content-length')));
  }
  return { status, headers, text: body.toString('utf8') };
}

function send(port: number, req: WireRequest): Promise<WireAnswer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      const answer = parseAnswer(Buffer.concat(chunks));
      if (answer) resolve(answer);
      else reject(new Error(`no HTTP answer${err ? ` (${err.message})` : ''}: ${Buffer.concat(chunks).toString('latin1').slice(0, 200)}`));
    };
    // Not end(): a half-closed connection would make the gateway drop the answer; Connection: close ends it.
    const socket = net.connect(port, '127.0.0.1', () => socket.write(serialize(req)));
    socket.setTimeout(20_000, () => finish(new Error('timed out')));
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      // A live event stream (GET /v1/events) never ends by itself: its head is the answer, and the client leaves.
      if (/\r\ncontent-type: text\/event-stream(?:\r\n[\s\S]*?)?\r\n\r\n/i.test(Buffer.concat(chunks).toString('latin1'))) finish();
    });
    // The gateway may answer and close before reading all of a refused request: what arrived counts.
    socket.on('error', (err) => finish(err));
    socket.on('end', () => finish());
    socket.on('close', () => finish());
  });
}

/** The contract this file checks: never a 5xx; a 4xx has {error, code, request_id = X-Request-Id}. */
function problemWith(answer: WireAnswer, method: string): string | undefined {
  if (answer.status >= 500) return `answered ${answer.status}: ${answer.text.slice(0, 300)}`;
  if (answer.status < 400) return undefined;
  if (!answer.headers.get('x-request-id')) return `answered ${answer.status} without X-Request-Id`;
  // A HEAD answer has the headers of the GET answer and no body.
  if (method === 'HEAD') return undefined;
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    return `answered ${answer.status} without a JSON body: ${JSON.stringify(answer.text.slice(0, 200))}`;
  }
  const b = body as Record<string, unknown>;
  if (typeof b !== 'object' || b === null || typeof b.error !== 'string' || typeof b.code !== 'string' || typeof b.request_id !== 'string') {
    return `answered ${answer.status} with a body that is not the error body: ${answer.text.slice(0, 300)}`;
  }
  if (b.request_id !== answer.headers.get('x-request-id')) return `request_id ${b.request_id} differs from X-Request-Id ${answer.headers.get('x-request-id')}`;
  return undefined;
}

// ---------------------------------------------------------------------------------------
// The fleet's devices and the caller

interface World {
  key: string;
  light: string;
  meter: string;
  /** Never provisioned. */
  unknown: string;
  /** May be provisioned by a generated request (at most these few). */
  fresh: string[];
}

/** Uploaded at the start (the push route's example names it) and never deleted by a generated request. */
const SPARED_FILE = 'chime.mp3';

let world: World;
let port: number;

beforeAll(async () => {
  port = Number(new URL(e2eFleet().gatewayUrl).port);
  const partner = await partnerWithKey([
    '--permissions', 'all,raw_mqtt_devices,raw_mqtt_global', '--access-all-devices',
    '--requests-per-min', '100000000', '--device-commands-per-min', '100000000',
  ]);
  world = { key: partner.key, light: randomDeviceId(), meter: randomDeviceId(), unknown: randomDeviceId(), fresh: [randomDeviceId(), randomDeviceId()] };
  for (const [id, product] of [[world.light, 'light'], [world.meter, 'meter']] as const) {
    const res = await api('POST', `/v1/devices/${id}`, { key: world.key, body: { credential_format: 'derived-v1', product, name: `malformed ${product}` } });
    expect(res.status).toBe(201);
  }
  // The file a push names in the route's example, so that well-formed pushes reach a transfer.
  expect([201, 409]).toContain((await uploadPlatformFile(world.key, 'files', SPARED_FILE, mp3(20))).status);
});

// ---------------------------------------------------------------------------------------
// Generators

const CONTROL = [...Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)), '\u007f'];
const ODD_TEXT = ['\u0000', '\u0001', '\n', '\r', '\t', '\u001b', '\u007f', '\u0085', '\u00a0', '\u2028', '\ud800', '\udfff', '\ufeff', '\ufffd', 'é', '☃', '😀', '"', '\\', '/', '%', '%00', '..', '\'; DROP TABLE devices; --', '${x}', '<script>', '*', '#', '+'];

/** Text of every kind: printable, control characters, lone surrogates, emoji, quotes. */
const anyText = (maxLength = 24): fc.Arbitrary<string> =>
  fc.oneof(
    { arbitrary: fc.string({ maxLength }), weight: 3 },
    { arbitrary: fc.string({ unit: 'binary', maxLength }), weight: 2 },
    { arbitrary: fc.array(fc.constantFrom(...ODD_TEXT, ...CONTROL, 'a', 'Z', '0'), { maxLength: 8 }).map((a) => a.join('')), weight: 3 },
  );

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
/** Percent-encoded UTF-8 of any text (a lone surrogate, which has no UTF-8, is sent as its raw bytes %ED%A0%80-style). */
const enc = (v: string): string =>
  v
    .split(LONE_SURROGATE)
    .map((part) => encodeURIComponent(part))
    .join('%ED%A0%80');

const hugeText = fc.tuple(fc.integer({ min: 1_000, max: 120_000 }), fc.constantFrom('x', 'é', '\u0000', '😀', ' ')).map(([n, c]) => c.repeat(n));

const FAR_TIMES = [
  '-271821-04-20T00:00:00Z', '+275760-09-13T00:00:00Z', '-004714-01-01T00:00:00Z', '0000-01-01T00:00:00Z', '1969-12-31T23:59:59Z',
  '1970-01-01T00:00:00Z', '9999-12-31T23:59:59Z', '+010000-01-01T00:00:00Z', '10000-01-01', '-1', '0', '253402300799', '253402300800',
  '-62135596800', '99999999999999', '1e10', 'NaN', 'Infinity', '', ' ', '2026-02-30T00:00:00Z', '2026-13-01', '2026-06-01T25:00:00Z',
  '2026-06-01T12:00:00+99:00', '2026-W01-1', '2026-001', 'T10:00', 'yesterday', '0x10', '1.5', '1780315200.123456', '1780315200.1234567',
];

/** Times inside and outside the supported range, in every form the meter parses and some it does not. */
const timeText: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...FAR_TIMES),
  fc.integer({ min: -8_640_000_000_000, max: 8_640_000_000_000 }).map((s) => String(s)),
  fc.date({ min: new Date(-8.64e15), max: new Date(8.64e15), noInvalidDate: true }).map((d) => d.toISOString()),
  fc.date({ min: new Date('2024-01-01T00:00:00Z'), max: new Date('2027-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString()),
  fc.integer({ min: 1_700_000_000, max: 1_800_000_000 }).map(String),
);

const types = (schema: JsonSchema): string[] => (Array.isArray(schema.type) ? (schema.type as string[]) : typeof schema.type === 'string' ? [schema.type] : []);

/** A value the schema accepts (as far as it says), sometimes at its edges. */
function validValue(schema: JsonSchema, name: string): fc.Arbitrary<unknown> {
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  const t = types(schema);
  const arbs: fc.Arbitrary<unknown>[] = [];
  // A documented example is valid where the schema alone cannot say enough (a signal's entries).
  if (Array.isArray(schema.examples) && schema.examples.length > 0) arbs.push(fc.constantFrom(...(schema.examples as unknown[])));
  if (t.includes('null')) arbs.push(fc.constant(null));
  if (t.includes('boolean')) arbs.push(fc.boolean());
  if (t.includes('integer')) {
    const min = typeof schema.minimum === 'number' ? schema.minimum : -1000;
    const max = typeof schema.maximum === 'number' ? schema.maximum : 100_000;
    arbs.push(fc.oneof(fc.integer({ min, max }), fc.constantFrom(min, max)));
  }
  if (t.includes('number')) arbs.push(fc.double({ min: -1e6, max: 1e6, noNaN: true, noDefaultInfinity: true }));
  if (t.includes('string')) {
    if (typeof schema.pattern === 'string' && !schema.pattern.includes('\\u0000')) {
      arbs.push(fc.stringMatching(new RegExp(schema.pattern)));
    } else {
      const minLength = typeof schema.minLength === 'number' ? schema.minLength : 0;
      const maxLength = Math.min(typeof schema.maxLength === 'number' ? schema.maxLength : 40, 40);
      const pattern = typeof schema.pattern === 'string' ? new RegExp(schema.pattern, 'u') : undefined;
      arbs.push(fc.string({ minLength, maxLength, unit: 'grapheme' }).filter((s) => s.length >= minLength && s.length <= maxLength && (!pattern || pattern.test(s))));
    }
  }
  if (t.includes('array') && schema.items) {
    const minLength = typeof schema.minItems === 'number' ? schema.minItems : 0;
    const maxLength = Math.min(typeof schema.maxItems === 'number' ? schema.maxItems : 3, 3);
    arbs.push(fc.array(validValue(schema.items as JsonSchema, name), { minLength, maxLength: Math.max(minLength, maxLength) }));
  }
  if (t.includes('object')) {
    if (schema.properties) arbs.push(validObject(schema));
    else arbs.push(name === 'params' ? effectParams : fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }));
  }
  if (arbs.length === 0) arbs.push(fc.jsonValue({ maxDepth: 2 }));
  return fc.oneof(...arbs);
}

/** Parameters of a predefined light effect, plausible and not. */
const effectParams: fc.Arbitrary<unknown> = fc.dictionary(
  fc.constantFrom('period_s', 'duty_ratio', 'brightness_pct', 'duration_s', 'interval_s', 'volume', 'color', 'file', 'count', 'pulse_s', 'unknown'),
  fc.oneof(fc.double({ noNaN: true }), fc.integer(), fc.constantFrom('FF0000', 'zz', '', '\u0000', 'a.mp3'), fc.constant(null), fc.array(fc.integer(), { maxLength: 2 })),
  { maxKeys: 4 },
);

function validObject(schema: JsonSchema): fc.Arbitrary<Record<string, unknown>> {
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((schema.required ?? []) as string[]);
  const shape: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, prop] of Object.entries(properties)) shape[name] = validValue(prop, name);
  const requiredKeys = Object.keys(properties).filter((k) => required.has(k));
  const onlyRequired = Object.fromEntries(requiredKeys.map((k) => [k, shape[k] as fc.Arbitrary<unknown>]));
  // Optional fields often depend on each other (a credential source and its secret): the required ones alone are a valid body too.
  return fc.oneof(
    { arbitrary: fc.record(shape, { requiredKeys }), weight: 2 },
    { arbitrary: fc.record(onlyRequired), weight: 1 },
  ) as fc.Arbitrary<Record<string, unknown>>;
}

/** A value of another kind than the schema wants, or one at or past its limits. */
function wrongValue(schema: JsonSchema): fc.Arbitrary<unknown> {
  const t = types(schema);
  const arbs: fc.Arbitrary<unknown>[] = [
    fc.constantFrom(null, true, false, 0, -1, 1.5, '', [], {}, [1, 'a'], { a: 1 }, 2 ** 53 + 1, -(2 ** 63), 1e308, -0),
    anyText(),
  ];
  if (t.includes('integer') || t.includes('number')) {
    const min = typeof schema.minimum === 'number' ? schema.minimum : 0;
    const max = typeof schema.maximum === 'number' ? schema.maximum : 1000;
    arbs.push(fc.constantFrom(min - 1, max + 1, min - 0.5, max + 0.001, 1e21, '1', '0x10', 'NaN'));
  }
  if (t.includes('string')) arbs.push(hugeText, anyText(200), fc.integer());
  return fc.oneof(...arbs);
}

/** A JSON body for the route: valid, then mutated, or replaced by something that is not a JSON object. */
function bodyText(route: RouteDef): fc.Arbitrary<string | Buffer> {
  const schema = route.body ?? { type: 'object', properties: {}, additionalProperties: false };
  const properties = Object.entries((schema.properties ?? {}) as Record<string, JsonSchema>);
  const base = validObject(schema);
  const mutated: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
    { arbitrary: base, weight: 2 },
    // a field of the wrong kind or out of range
    ...(properties.length
      ? [{ arbitrary: fc.tuple(base, fc.constantFrom(...properties)).chain(([b, [k, s]]) => wrongValue(s).map((v) => ({ ...b, [k]: v }))), weight: 4 }]
      : []),
    // a required field missing
    ...((schema.required as string[] | undefined)?.length
      ? [{ arbitrary: fc.tuple(base, fc.constantFrom(...(schema.required as string[]))).map(([b, k]) => Object.fromEntries(Object.entries(b).filter(([n]) => n !== k))), weight: 1 }]
      : []),
    // a field nobody declared
    { arbitrary: fc.tuple(base, fc.oneof(anyText(12), fc.constantFrom('__proto__', 'constructor', 'toString', '')), fc.jsonValue({ maxDepth: 2 })).map(([b, k, v]) => ({ ...b, [k]: v })), weight: 1 },
    // text with control characters in a declared string field
    ...(properties.length
      ? [{ arbitrary: fc.tuple(base, fc.constantFrom(...properties.map(([k]) => k)), fc.constantFrom(...CONTROL, '\ud800', '\udc00')).map(([b, k, c]) => ({ ...b, [k]: `a${c}b` })), weight: 2 }]
      : []),
  );
  const whole: fc.Arbitrary<string | Buffer> = fc.oneof(
    fc.constantFrom('', '{', '}', '[]', '[{}]', 'null', 'true', '0', '"x"', '{"a":}', '{"a":1,}', "{'a':1}", '{"a":1}{"b":2}', '\ufeff{}', '{"a":"\\ud800"}', '{"a":"\\u0000"}', '{"__proto__":{"x":1}}', 'NaN', '{"a":1e999}'),
    fc.integer({ min: 33, max: 2000 }).map((n) => `${'['.repeat(n)}${']'.repeat(n)}`),
    fc.integer({ min: 33, max: 2000 }).map((n) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`),
    fc.uint8Array({ minLength: 1, maxLength: 64 }).map((a) => Buffer.from(a)),
    base.map((b) => Buffer.concat([Buffer.from(JSON.stringify(b).slice(0, -1)), Buffer.from([0xff, 0xfe]), Buffer.from('}')])),
    base.map((b) => Buffer.from(JSON.stringify(b), 'utf16le')),
  );
  return fc.oneof({ arbitrary: mutated.map((b) => JSON.stringify(b)), weight: 5 }, { arbitrary: whole, weight: 2 });
}

const ZONES = ['UTC', 'Europe/Berlin', 'Pacific/Kiritimati', 'Pacific/Pago_Pago', 'America/New_York', 'Australia/Lord_Howe', 'Etc/GMT+12', 'Etc/GMT-14', 'utc', 'Z', '+01:00', 'UTC+5', 'Local', 'system', '../../etc/passwd', 'Europe/Nowhere', 'EUROPE/BERLIN'];

/** Cursors a client could forge: base64url JSON with windows, keys and bookmarks of every size. */
const forgedCursor: fc.Arbitrary<string> = fc
  .record({
    m: fc.constantFrom('s', 'r', 'x'),
    d: fc.constantFrom(() => world.meter, () => world.light, () => 'x').map((f) => f()),
    s: fc.oneof(fc.integer({ min: -8.64e15, max: 8.64e15 }), fc.constantFrom(0, -86_400_000, 253_402_300_799_000, 1e300, -1)),
    e: fc.oneof(fc.integer({ min: -8.64e15, max: 8.64e15 }), fc.constantFrom(1, 86_400_000, 253_402_300_799_000, 8.64e15 + 1)),
    u: fc.oneof(fc.boolean(), fc.constant('true')),
    k: fc.tuple(fc.oneof(fc.constant(null), fc.integer({ min: -8.64e15, max: 8.64e15 })), fc.oneof(fc.stringMatching(/^#?[0-9a-f]{0,16}$/), anyText(8)), fc.oneof(fc.integer(), fc.constant(2 ** 60))),
    ep: anyText(8),
    a: fc.oneof(fc.nat(), fc.constantFrom(-1, 2 ** 53, 1.5)),
  })
  .map((doc) => Buffer.from(JSON.stringify(doc)).toString('base64url'));

/** One query parameter value as written on the wire (already percent-encoded, or deliberately not). */
function queryValue(name: string, schema: JsonSchema | undefined): fc.Arbitrary<string> {
  const isTime = ['start', 'end', 'received_since', 'since'].includes(name);
  const plain: fc.Arbitrary<string> = isTime
    ? timeText
    : name === 'tz'
      ? fc.oneof(fc.constantFrom(...ZONES), anyText())
      : name === 'cursor'
        ? fc.oneof(forgedCursor, anyText())
        : schema
      ? fc.oneof(validValue(schema, name).map((v) => (typeof v === 'string' ? v : JSON.stringify(v))), wrongValue(schema).map((v) => (typeof v === 'string' ? v : JSON.stringify(v))))
      : anyText();
  const numberish = fc.constantFrom('0x10', '1e1', ' 16', '16 ', '+16', '-0', '016', '1_000', '١٦', '16.0', '9'.repeat(30), 'true', 'false', 'TRUE', '1', '0', 'null', 'undefined');
  return fc.oneof(
    { arbitrary: plain.map(enc), weight: 6 },
    { arbitrary: numberish.map(enc), weight: 2 },
    { arbitrary: fc.constantFrom('%ZZ', '%', '%E0%A4%A', '%FF', '%C3', '%ED%A0%80', '%00', 'a%00b', '%0A', '%7F', '+', '%2B', 'a+b', 'é'), weight: 1 },
    { arbitrary: hugeText.map((t) => enc(t.slice(0, 3000))), weight: 1 },
  );
}

/** A query string for the route: any of its parameters with any values and extras, or (wellFormed) its required ones with valid values. */
function queryString(route: RouteDef, { wellFormed = false } = {}): fc.Arbitrary<string> {
  const properties = Object.entries(route.query?.properties ?? {});
  if (wellFormed) {
    const required = new Set((route.query?.required ?? []) as string[]);
    if (!required.size) return fc.constant('');
    return fc
      .tuple(...[...required].map((n) => validValue(route.query?.properties[n] as JsonSchema, n).map((v) => `${n}=${enc(typeof v === 'string' ? v : JSON.stringify(v))}`)))
      .map((parts) => `?${parts.join('&')}`);
  }
  const declared = properties.length
    ? fc.subarray(properties.map(([k]) => k)).chain((names) => fc.tuple(...names.map((n) => queryValue(n, route.query?.properties[n]).map((v) => `${n}=${v}`))))
    : fc.constant([] as string[]);
  const extra = fc.array(
    fc.oneof(
      fc.tuple(fc.constantFrom('foo', 'limit', 'cursor', 'confirm', '__proto__', 'a[b]', 'start[]', '', 'x%00'), queryValue('x', undefined)).map(([k, v]) => `${k}=${v}`),
      properties.length ? fc.constantFrom(...properties.map(([k]) => k)).chain((k) => queryValue(k, undefined).map((v) => `${k}=${v}`)) : fc.constant('x=1'),
      fc.constantFrom('novalue', '=', '&', '&&', '==', '?'),
    ),
    { maxLength: 3 },
  );
  return fc.tuple(declared, fc.oneof({ arbitrary: fc.constant([] as string[]), weight: 3 }, { arbitrary: extra, weight: 1 })).map(([a, b]) => {
    const parts = [...a, ...b];
    return parts.length ? `?${parts.join('&')}` : '';
  });
}

/** The value of one path parameter, percent-encoded as it would be sent (or deliberately broken). */
function pathValue(name: string, schema: JsonSchema | undefined, route: RouteDef): fc.Arbitrary<string> {
  if (name === 'device_id') {
    const product = route.device?.product;
    const mine = product === 'meter' ? world.meter : product === 'light' ? world.light : undefined;
    const provisioning = route.method === 'POST' && route.path === '/v1/devices/{device_id}';
    return fc.oneof(
      { arbitrary: fc.constantFrom(world.light, world.meter), weight: 6 },
      { arbitrary: fc.constant(mine ?? world.light), weight: 4 },
      { arbitrary: fc.constant(world.unknown), weight: 2 },
      { arbitrary: provisioning ? fc.constantFrom(...world.fresh) : fc.constant(world.unknown), weight: 1 },
      { arbitrary: fc.constantFrom(world.light.toLowerCase(), `${world.meter}0`, world.light.slice(1), '%00', 'AAAAAAAAAA%0001', '%ZZ', '..', '%2e%2e', 'é', '%C3%A9', '%ED%A0%80', 'x'.repeat(600), '%20', 'AAAAAAAAAAA%0A'), weight: 2 },
      { arbitrary: anyText(16).map(enc), weight: 1 },
    );
  }
  return fc.oneof(
    { arbitrary: (schema ? validValue(schema, name) : anyText()).map((v) => enc(String(v))), weight: 3 },
    { arbitrary: anyText(40).map(enc), weight: 2 },
    { arbitrary: fc.constantFrom('%00', '%ZZ', '%ED%A0%80', 'é', '..', '%2F', 'x'.repeat(2000)), weight: 1 },
  );
}

/** The route's path with each parameter from `valueOf` (by default any value, valid or not). */
function pathFor(route: RouteDef, valueOf: (name: string) => fc.Arbitrary<string> = (n) => pathValue(n, route.params?.[n], route)): fc.Arbitrary<string> {
  const names = pathParamNames(route.path);
  if (!names.length) return fc.constant(route.path);
  return fc.tuple(...names.map(valueOf)).map((values) => {
    let path = route.path;
    names.forEach((n, i) => (path = path.replace(`{${n}}`, values[i] as string)));
    return path;
  });
}

/** Headers: the key (mostly valid), a media type (mostly JSON), sometimes Content-Encoding, repeats, odd Idempotency-Keys. */
function headersFor(route: RouteDef, hasBody: boolean): fc.Arbitrary<Array<[string, string]>> {
  const authorization = fc.oneof(
    { arbitrary: fc.constant([['Authorization', `Bearer ${world.key}`]] as Array<[string, string]>), weight: 20 },
    { arbitrary: fc.constant([] as Array<[string, string]>), weight: 1 },
    { arbitrary: fc.constantFrom('Bearer', 'Bearer ', `Basic ${Buffer.from('a:b').toString('base64')}`, `Bearer ${world.key}x`, `bearer ${world.key}`, `Bearer ${'A'.repeat(3000)}`, `Bearer pdk_zzzzzzzzzzzz_${'B'.repeat(32)}`, `Bearer ${world.key.replace(/_/g, '\u00e9')}`).map((v) => [['Authorization', v]] as Array<[string, string]>), weight: 1 },
    { arbitrary: fc.constantFrom(`Bearer ${world.key}`, 'Bearer nope').map((second) => [['Authorization', `Bearer ${world.key}`], ['authorization', second]] as Array<[string, string]>), weight: 1 },
  );
  const contentType = fc.oneof(
    { arbitrary: fc.constant(hasBody ? [['Content-Type', 'application/json']] : []) as fc.Arbitrary<Array<[string, string]>>, weight: 12 },
    {
      arbitrary: fc
        .constantFrom(
          'text/plain', 'application/json; charset=utf-16', 'application/json; charset=latin1', 'Application/JSON; charset="UTF-8"', 'application/json;charset=utf-8;q=1',
          'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', '', 'application/json;;', '*/*', 'application/json, text/plain', 'application/merge-patch+json',
          'application/json; charset', 'json', 'application/json\u00e9',
        )
        .map((v) => [['Content-Type', v]] as Array<[string, string]>),
      weight: 2,
    },
    { arbitrary: fc.constant([['Content-Type', 'application/json'], ['Content-Type', 'text/plain']] as Array<[string, string]>), weight: 1 },
  );
  const encoding = fc.oneof(
    { arbitrary: fc.constant([] as Array<[string, string]>), weight: 14 },
    { arbitrary: fc.constantFrom('gzip', 'br', 'deflate', 'identity', 'IDENTITY', 'x-unknown', 'gzip, identity', '', 'compress').map((v) => [['Content-Encoding', v]] as Array<[string, string]>), weight: 1 },
  );
  const idempotency = fc.oneof(
    { arbitrary: fc.constant([] as Array<[string, string]>), weight: route.idempotent ? 4 : 10 },
    { arbitrary: fc.stringMatching(/^[\x21-\x7e]{1,40}$/).map((k) => [['Idempotency-Key', k]] as Array<[string, string]>), weight: 2 },
    { arbitrary: fc.constantFrom('', ' ', 'a b', 'x'.repeat(256), 'caf\u00e9', '\t').map((k) => [['Idempotency-Key', k]] as Array<[string, string]>), weight: 1 },
    { arbitrary: fc.constant([['Idempotency-Key', 'k1'], ['Idempotency-Key', 'k2']] as Array<[string, string]>), weight: 1 },
  );
  const extra = fc.oneof(
    { arbitrary: fc.constant([] as Array<[string, string]>), weight: 10 },
    { arbitrary: fc.constantFrom<Array<[string, string]>>([['X-Forwarded-Proto', 'https']], [['X-Request-Id', 'req_mine']], [['Accept', 'text/html']], [['X-Odd', '\u00ff\u00fe']], [['Expect', '100-continue']]), weight: 1 },
  );
  return fc.tuple(authorization, contentType, encoding, idempotency, extra).map((parts) => parts.flat());
}

/** Requests Node's HTTP parser refuses, or that test its limits. */
const parserRequests: fc.Arbitrary<WireRequest> = fc
  .constantFrom(
    () => Buffer.concat([Buffer.from('GET /v1/devices/'), Buffer.from([0xc3, 0xa9]), Buffer.from(' HTTP/1.1\r\nHost: x\r\n\r\n')]),
    () => Buffer.from(`GET /v1/account HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${world.key}\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`),
    () => Buffer.from('GET /v1/account HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab'),
    () => Buffer.from('POST /v1/devices HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'),
    () => Buffer.from('POST /v1/devices HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n'),
    () => Buffer.from('GET /v1/account HTTP/9.9\r\nHost: x\r\n\r\n'),
    () => Buffer.from('GET /v1/acc ount HTTP/1.1\r\nHost: x\r\n\r\n'),
    () => Buffer.from('GET /v1/account HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n'),
    () => Buffer.from('GET /v1/account HTTP/1.1\r\nHost: x\r\nX: a\u0000b\r\n\r\n', 'latin1'),
    () => Buffer.from('\u0000\u0001\u0002 garbage\r\n\r\n', 'latin1'),
    () => Buffer.from(`GET /v1/${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`),
    // Chunked bodies, well framed: a JSON command, and one declared gzip-then-chunked.
    () => Buffer.from(`POST /v1/devices/${world.light}/commands HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${world.key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n9\r\n{"channel"\r\n10\r\n:"light9","x":1}\r\n0\r\n\r\n`),
    () => Buffer.from(`PATCH /v1/devices/${world.light}/config HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${world.key}\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n4\r\nabcd\r\n0\r\n\r\n`),
    () => Buffer.from(`GET /v1/account HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${world.key}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`),
  )
  .map((make) => ({ route: 'HTTP parser', method: '', target: '', headers: [], raw: make() }));

/** A multipart/form-data body: text fields, then a `file` part (name and bytes), then the closing boundary. */
function multipartForm(boundary: string, fields: Array<[string, string]>, file: [string, Buffer] | undefined): Buffer {
  return Buffer.concat([
    ...fields.map(([k, v]) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)),
    ...(file ? [Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file[0]}"\r\nContent-Type: application/octet-stream\r\n\r\n`), file[1], Buffer.from('\r\n')] : []),
    Buffer.from(`--${boundary}--\r\n`),
  ]);
}

/**
 * The body of a streamed upload route (multipart/form-data): a well-formed form sometimes (so
 * the owner stores a file or finds a clash), mostly one with a part missing, a bad `dir` or
 * name, a boundary that does not match, a cut end or bytes that are no form at all.
 */
function multipartBody(): fc.Arbitrary<{ body: Buffer; contentType: string }> {
  const boundary = fc.stringMatching(/^[A-Za-z0-9'()+_,.-]{1,40}$/);
  const dir = fc.oneof({ arbitrary: fc.constant('files'), weight: 6 }, { arbitrary: fc.constantFrom('firmware', '', 'etc', '../files', 'FILES', 'files\u0000'), weight: 3 });
  const name = fc.oneof(
    { arbitrary: fc.stringMatching(/^[a-z0-9]{1,12}$/).map((n) => `fuzz-${n}.txt`), weight: 3 },
    { arbitrary: fc.constantFrom('a.bin', 'x.mp3', 'notes.json', '../../etc/passwd', '.hidden.txt', 'a b.txt', '', 'C:\\dir\\f.txt', 'a'.repeat(80) + '.txt', 'caf\u00e9.wav', 'x.exe'), weight: 2 },
  );
  return fc
    .tuple(boundary, dir, name, fc.uint8Array({ maxLength: 256 }).map((a) => Buffer.from(a)), fc.oneof({ arbitrary: fc.constant('whole'), weight: 4 }, { arbitrary: fc.constantFrom('no dir', 'no file', 'dir after', 'cut', 'other boundary', 'text file field', 'raw'), weight: 4 }))
    .map(([b, d, n, data, shape]) => {
      const contentType = `multipart/form-data; boundary=${b}`;
      switch (shape) {
        case 'no dir':
          return { body: multipartForm(b, [], [n, data]), contentType };
        case 'no file':
          return { body: multipartForm(b, [['dir', d]], undefined), contentType };
        case 'dir after':
          return { body: Buffer.concat([multipartForm(b, [], [n, data]).subarray(0, -(b.length + 6)), multipartForm(b, [['dir', d]], undefined)]), contentType };
        case 'cut': {
          const whole = multipartForm(b, [['dir', d]], [n, data]);
          return { body: whole.subarray(0, Math.max(1, whole.length - 10)), contentType };
        }
        case 'other boundary':
          return { body: multipartForm(`${b}x`, [['dir', d]], [n, data]), contentType };
        case 'text file field':
          return { body: multipartForm(b, [['dir', d], ['file', data.toString('latin1')]], undefined), contentType };
        case 'raw':
          return { body: data, contentType };
        default:
          return { body: multipartForm(b, [['dir', d]], [n, data]), contentType };
      }
    });
}

/** A request to a streamed upload route: its multipart body, or another content type now and then. */
function uploadRequestFor(route: RouteDef): fc.Arbitrary<WireRequest> {
  return fc
    .tuple(multipartBody(), headersFor(route, true), fc.constantFrom('multipart', 'multipart', 'multipart', 'multipart', 'json', 'none'))
    .map(([{ body, contentType }, headers, kind]) => {
      const others = headers.filter(([k]) => k.toLowerCase() !== 'content-type');
      const type: Array<[string, string]> = kind === 'multipart' ? [['Content-Type', contentType]] : kind === 'json' ? [['Content-Type', 'application/json']] : [];
      return { route: `${route.method} ${route.path}`, method: route.method, target: route.path, headers: [...others, ...type], body };
    });
}

/** A well-formed upload: a new text file in files/, with the key. */
function wellFormedUploadFor(route: RouteDef): fc.Arbitrary<WireRequest> {
  return fc.tuple(fc.stringMatching(/^[a-z0-9]{1,12}$/), fc.uint8Array({ maxLength: 256 })).map(([n, data]) => {
    const boundary = 'fuzzboundary';
    const body = multipartForm(boundary, [['dir', 'files']], [`fuzz-${n}.txt`, Buffer.from(data)]);
    return {
      route: `${route.method} ${route.path}`,
      method: route.method,
      target: route.path,
      headers: [['Authorization', `Bearer ${world.key}`], ['Content-Type', `multipart/form-data; boundary=${boundary}`]] as Array<[string, string]>,
      body,
    };
  });
}

function requestFor(route: RouteDef): fc.Arbitrary<WireRequest> {
  if ('upload' in route.target) {
    return fc.oneof({ arbitrary: uploadRequestFor(route), weight: 4 }, { arbitrary: jsonRequestFor(route), weight: 1 }, { arbitrary: wellFormedUploadFor(route), weight: 1 });
  }
  return jsonRequestFor(route);
}

/**
 * A request the route's schemas accept: its method, own devices in the path, required query
 * parameters, a valid body and key. Mixed in now and then so that every route reaches its owning
 * service in every run, whatever the seed (a malformed request alone rarely gets all of that right).
 */
function wellFormedRequestFor(route: RouteDef): fc.Arbitrary<WireRequest> {
  const mine = route.device?.product === 'meter' ? world.meter : world.light;
  const path = pathFor(route, (n) => (n === 'device_id' ? fc.constant(mine) : validValue(route.params?.[n] ?? { type: 'string', minLength: 1 }, n).map((v) => enc(String(v)))));
  // The route's own examples (what /docs shows) half the time: a schema-valid body alone is often refused by its owner (an unknown verb).
  const body = route.body ? validValue(route.body, 'body').map((b): Buffer | undefined => Buffer.from(JSON.stringify(b))) : fc.constant(undefined);
  return fc.tuple(path, queryString(route, { wellFormed: true }), body).map(([p, query, b]) => ({
    route: `${route.method} ${route.path}`,
    method: route.method,
    target: `${p}${query}`,
    headers: [['Authorization', `Bearer ${world.key}`], ...(b ? [['Content-Type', 'application/json']] : [])] as Array<[string, string]>,
    ...(b ? { body: b } : {}),
  }));
}

function jsonRequestFor(route: RouteDef): fc.Arbitrary<WireRequest> {
  return fc.oneof({ arbitrary: malformedJsonRequestFor(route), weight: 9 }, { arbitrary: wellFormedRequestFor(route), weight: 1 }).map((req) => spareWorld(req));
}

function malformedJsonRequestFor(route: RouteDef): fc.Arbitrary<WireRequest> {
  const takesBody = route.body !== undefined;
  const otherMethods = (['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'TRACE'] as const).filter((m) => m !== route.method);
  const method = fc.oneof({ arbitrary: fc.constant(route.method as string), weight: 19 }, { arbitrary: fc.constantFrom<string>(...otherMethods), weight: 1 });
  // Routes that take a body get one mostly; others mostly none, sometimes one anyway.
  const body = fc.oneof(
    { arbitrary: bodyText(route).map((b) => (typeof b === 'string' ? Buffer.from(b) : b)), weight: takesBody ? 9 : 2 },
    { arbitrary: fc.constant(undefined), weight: takesBody ? 1 : 6 },
  );
  return fc
    .tuple(method, pathFor(route), queryString(route), body)
    .chain(([m, path, query, b]) =>
      headersFor(route, b !== undefined).map((headers) => ({
        route: `${route.method} ${route.path}`,
        method: m,
        target: `${path}${query}`,
        headers,
        ...(b !== undefined && m !== 'HEAD' ? { body: b } : {}),
      })),
    );
}

/**
 * Keeps the two target devices and the pushed platform file: a removal that names one of them
 * (with a matching confirm) would succeed, as it is a valid request, so the name is changed.
 */
function spareWorld(req: WireRequest): WireRequest {
  if (req.method === 'DELETE' && req.target.startsWith('/v1/system/files')) return { ...req, target: req.target.split(`name=${SPARED_FILE}`).join(`name=spared-${SPARED_FILE}`) };
  if (req.method !== 'DELETE' || !new RegExp(`^/v1/devices/${DEVICE_ID_PATTERN.slice(1, -1)}(\\?|$)`).test(req.target)) return req;
  const guarded = [world.light, world.meter];
  let target = req.target;
  for (const id of guarded) target = target.split(`confirm=${id}`).join(`confirm=${id.toLowerCase()}`);
  let body = req.body;
  if (body) for (const id of guarded) body = Buffer.from(body.toString('latin1').split(id).join(id.toLowerCase()), 'latin1');
  return { ...req, target, ...(body ? { body } : {}) };
}

/** A request that prints as one short line in fast-check's report. */
const printable = (req: WireRequest): WireRequest => Object.defineProperty(req, fc.toStringMethod, { value: () => show(req), enumerable: false });

/** A request somewhere: any route of the table (uniformly), no route at all, or raw bytes. */
function anyRequest(): fc.Arbitrary<WireRequest> {
  return fc.oneof(
    { arbitrary: fc.constantFrom(...routes).chain(requestFor), weight: 96 },
    {
      arbitrary: fc
        .tuple(fc.constantFrom('/v1', '/v1/', '/v2/devices', '/v1/devices/X/nope', '/V1/ACCOUNT', '/v1//devices', '/%2e%2e/v1/account', '/v1/devices/%ZZ/health', '/docs/%ZZ', '/'), queryValue('q', undefined))
        .map(([target, q]) => ({ route: 'no route', method: 'GET', target: `${target}?q=${q}`, headers: [['Authorization', `Bearer ${world.key}`]] as Array<[string, string]> })),
      weight: 2,
    },
    { arbitrary: parserRequests, weight: 2 },
  ).map(printable);
}

// ---------------------------------------------------------------------------------------

it(`answers ${REQUESTS} malformed requests across every route with a 4xx error body, never a 5xx (seed ${SEED})`, async () => {
  const seen = new Map<string, Map<number, number>>();
  const record = (req: WireRequest, status: number) => {
    const byStatus = seen.get(req.route) ?? new Map<number, number>();
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    seen.set(req.route, byStatus);
  };

  await fc.assert(
    fc.asyncProperty(fc.array(anyRequest(), { minLength: CONCURRENCY, maxLength: CONCURRENCY }), async (batch) => {
      const answers = await Promise.all(batch.map((req) => send(port, req).then((a) => ({ ok: true as const, a }), (e: Error) => ({ ok: false as const, e }))));
      const problems: string[] = [];
      answers.forEach((answer, i) => {
        const req = batch[i] as WireRequest;
        if (!answer.ok) return void problems.push(`${show(req)}: ${answer.e.message}`);
        record(req, answer.a.status);
        const problem = problemWith(answer.a, req.method);
        if (problem) problems.push(`${show(req)}: ${problem}`);
      });
      if (problems.length) throw new Error(problems.join('\n'));
    }),
    {
      numRuns: Math.ceil(REQUESTS / CONCURRENCY),
      seed: SEED,
      ...(process.env.MALFORMED_PATH ? { path: process.env.MALFORMED_PATH } : {}),
      // Shrinking re-sends requests to a live fleet; a bounded effort keeps a failure report quick.
      interruptAfterTimeLimit: 150_000,
      markInterruptAsFailure: false,
      endOnFailure: process.env.MALFORMED_SHRINK === undefined,
    },
  );

  if (process.env.MALFORMED_REPORT) {
    const lines = [...seen].map(([route, byStatus]) => `${route}: ${[...byStatus].sort(([a], [b]) => a - b).map(([st, n]) => `${st}×${n}`).join(' ')}`);
    process.stdout.write(`answers by route (seed ${SEED}):\n${lines.sort().join('\n')}\n`);
  }

  // Every route of the table was exercised, and got past the gateway's checks at least once.
  for (const route of routes) {
    const byStatus = seen.get(`${route.method} ${route.path}`);
    const total = [...(byStatus?.values() ?? [])].reduce((a, b) => a + b, 0);
    expect({ route: route.path, method: route.method, enough: total >= Math.floor(REQUESTS / routes.length / 3) }).toEqual({ route: route.path, method: route.method, enough: true });
    const beyondGateway = [...(byStatus?.keys() ?? [])].filter((s) => ![400, 401, 405, 413, 415, 431].includes(s));
    expect({ route: `${route.method} ${route.path}`, beyondGateway: beyondGateway.length > 0 }).toEqual({ route: `${route.method} ${route.path}`, beyondGateway: true });
  }
});

function show(req: WireRequest): string {
  if (req.raw) return `raw ${JSON.stringify(req.raw.toString('latin1').slice(0, 160))}`;
  const body = req.body ? ` body ${JSON.stringify(req.body.toString('latin1').slice(0, 200))}${req.body.length > 200 ? `… (${req.body.length} bytes)` : ''}` : '';
  return `${req.method} ${JSON.stringify(req.target.slice(0, 300))} [${req.route}] headers ${JSON.stringify(req.headers.map(([n, v]) => [n, v.slice(0, 80)]))}${body}`;
}
