import { randomBytes } from 'node:crypto';
import Redis from 'ioredis';
import { IdempotencyStore, isValidIdempotencyKey, requestFingerprint, type StoredResponse } from '../src/idempotency';

const PREFIX = `test:idem:${process.pid}:${randomBytes(4).toString('hex')}:`;
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const store = new IdempotencyStore(redis, { keyPrefix: PREFIX });

let n = 0;
const scope = (): string => `partner-${++n}:POST /v1/devices/{device_id}/commands`;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const FP_A = requestFingerprint({ method: 'POST', path: '/v1/devices/0123456789AB/commands', query: {}, body: { channel: 'light1', payload: 'x' } });
const FP_B = requestFingerprint({ method: 'POST', path: '/v1/devices/0123456789AB/commands', query: {}, body: { channel: 'light1', payload: 'y' } });

const ok: StoredResponse = {
  status: 202,
  headers: { location: '/v1/jobs/42', 'content-type': 'application/json' },
  body: { channel: 'light1', command: 'blink', nested: { list: [1, 2.5, null, 'ü'], big: 12345678901234 } },
};

afterAll(async () => {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 1000);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  await redis.quit();
});

describe('IdempotencyStore', () => {
  it('starts, answers in_progress while running, then replays the kept 2xx response', async () => {
    const s = scope();
    expect(await store.begin(s, 'key-1', FP_A)).toEqual({ kind: 'started' });
    expect(await store.begin(s, 'key-1', FP_A)).toEqual({ kind: 'in_progress', retryAfterSeconds: 1 });

    await store.complete(s, 'key-1', FP_A, ok);
    expect(await store.begin(s, 'key-1', FP_A)).toEqual({ kind: 'replay', response: ok });
    expect(await store.begin(s, 'key-1', FP_A)).toEqual({ kind: 'replay', response: ok });

    const ttl = await redis.ttl(store.redisKey(s, 'key-1'));
    expect(ttl).toBeGreaterThan(86_400 - 5);
    expect(ttl).toBeLessThanOrEqual(86_400);
  });

  it('replays a response without a body', async () => {
    const s = scope();
    await store.begin(s, 'k', FP_A);
    await store.complete(s, 'k', FP_A, { status: 204, headers: {}, body: undefined });
    const r = await store.begin(s, 'k', FP_A);
    expect(r.kind).toBe('replay');
    expect(r.kind === 'replay' && r.response).toEqual({ status: 204, headers: {}, body: undefined });
  });

  it('answers mismatch for a different request with the same key, running or completed', async () => {
    const s = scope();
    await store.begin(s, 'k', FP_A);
    expect(await store.begin(s, 'k', FP_B)).toEqual({ kind: 'mismatch' });
    await store.complete(s, 'k', FP_A, ok);
    expect(await store.begin(s, 'k', FP_B)).toEqual({ kind: 'mismatch' });
    // the completed record is untouched by the mismatching attempts
    expect(await store.begin(s, 'k', FP_A)).toEqual({ kind: 'replay', response: ok });
  });

  it('scopes keys by account and route', async () => {
    const s1 = scope();
    const s2 = scope();
    expect((await store.begin(s1, 'shared', FP_A)).kind).toBe('started');
    expect((await store.begin(s2, 'shared', FP_B)).kind).toBe('started');
    expect(store.redisKey(s1, 'shared')).not.toBe(store.redisKey(s2, 'shared'));
    expect(store.redisKey(s1, 'shared')).toMatch(new RegExp(`^${PREFIX.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[0-9a-f]{64}$`));
  });

  it('gives exactly one started to concurrent begins with the same key', async () => {
    const s = scope();
    const second = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    try {
      const other = new IdempotencyStore(second, { keyPrefix: PREFIX });
      const results = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 === 0 ? store : other).begin(s, 'race', FP_A)));
      expect(results.filter((r) => r.kind === 'started')).toHaveLength(1);
      expect(results.filter((r) => r.kind === 'in_progress')).toHaveLength(29);
    } finally {
      await second.quit();
    }
  });

  it('forgets the key after a non-2xx response so it runs again', async () => {
    const s = scope();
    await store.begin(s, 'k', FP_A);
    await store.complete(s, 'k', FP_A, { status: 503, headers: {}, body: { code: 'publish_failed' } });
    expect(await redis.exists(store.redisKey(s, 'k'))).toBe(0);
    expect(await store.begin(s, 'k', FP_A)).toEqual({ kind: 'started' });
    // after a failure the key is free for another request as well
    await store.complete(s, 'k', FP_A, { status: 400, headers: {}, body: { code: 'validation_error' } });
    expect(await store.begin(s, 'k', FP_B)).toEqual({ kind: 'started' });
  });

  it('release forgets a running key but never a kept response', async () => {
    const s = scope();
    await store.begin(s, 'k', FP_A);
    await store.release(s, 'k');
    expect(await store.begin(s, 'k', FP_A)).toEqual({ kind: 'started' });
    await store.complete(s, 'k', FP_A, ok);
    await store.release(s, 'k');
    expect(await store.begin(s, 'k', FP_A)).toEqual({ kind: 'replay', response: ok });
  });

  it('a late non-2xx completion does not drop a response kept for the same key', async () => {
    const s = scope();
    await store.begin(s, 'k', FP_A);
    await store.complete(s, 'k', FP_A, ok);
    await store.complete(s, 'k', FP_A, { status: 500, headers: {}, body: null });
    expect(await store.begin(s, 'k', FP_A)).toEqual({ kind: 'replay', response: ok });
  });

  it("lets a crashed request's lock expire after lockSeconds", async () => {
    const short = new IdempotencyStore(redis, { keyPrefix: PREFIX, lockSeconds: 1 });
    const s = scope();
    expect(await short.begin(s, 'k', FP_A)).toEqual({ kind: 'started' });
    const pttl = await redis.pttl(short.redisKey(s, 'k'));
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(1000);
    expect((await short.begin(s, 'k', FP_A)).kind).toBe('in_progress');
    await sleep(1100);
    expect(await short.begin(s, 'k', FP_A)).toEqual({ kind: 'started' });
  });

  it('keeps a 2xx that completes after its lock expired', async () => {
    const short = new IdempotencyStore(redis, { keyPrefix: PREFIX, lockSeconds: 1, retentionSeconds: 120 });
    const s = scope();
    await short.begin(s, 'k', FP_A);
    await redis.del(short.redisKey(s, 'k')); // as if the lock had expired
    await short.complete(s, 'k', FP_A, ok);
    expect(await short.begin(s, 'k', FP_A)).toEqual({ kind: 'replay', response: ok });
    expect(await redis.ttl(short.redisKey(s, 'k'))).toBeGreaterThan(100);
  });

  it('rejects nonsensical options', () => {
    expect(() => new IdempotencyStore(redis, { lockSeconds: 0 })).toThrow(RangeError);
    expect(() => new IdempotencyStore(redis, { retentionSeconds: 1.5 })).toThrow(RangeError);
  });
});

describe('requestFingerprint', () => {
  const base = { method: 'POST', path: '/v1/devices/0123456789AB/config', query: { a: '1', b: '2' } };

  it('ignores the order of object keys at any depth', () => {
    const one = requestFingerprint({ ...base, body: { name: 'x', sensors: [{ id: 's1', label: 'L' }], nested: { p: 1, q: [true, null] } } });
    const two = requestFingerprint({
      ...base,
      query: { b: '2', a: '1' },
      body: { nested: { q: [true, null], p: 1 }, sensors: [{ label: 'L', id: 's1' }], name: 'x' },
    });
    expect(one).toBe(two);
    expect(one).toMatch(/^[0-9a-f]{64}$/);
  });

  it('changes with any value, array order, method, path or query', () => {
    const ref = requestFingerprint({ ...base, body: { name: 'x', list: [1, 2] } });
    expect(requestFingerprint({ ...base, body: { name: 'y', list: [1, 2] } })).not.toBe(ref);
    expect(requestFingerprint({ ...base, body: { name: 'x', list: [2, 1] } })).not.toBe(ref);
    expect(requestFingerprint({ ...base, body: { name: 'x', list: [1, 2], extra: false } })).not.toBe(ref);
    expect(requestFingerprint({ ...base, body: { name: 'x', list: ['1', 2] } })).not.toBe(ref);
    expect(requestFingerprint({ ...base, method: 'PATCH', body: { name: 'x', list: [1, 2] } })).not.toBe(ref);
    expect(requestFingerprint({ ...base, path: '/v1/devices/BA9876543210/config', body: { name: 'x', list: [1, 2] } })).not.toBe(ref);
    expect(requestFingerprint({ ...base, query: { a: '1' }, body: { name: 'x', list: [1, 2] } })).not.toBe(ref);
    expect(requestFingerprint({ ...base, body: { name: 'x', list: [1, 2] } })).toBe(ref);
  });

  it('does not let a key and a value trade places', () => {
    expect(requestFingerprint({ ...base, body: { a: 'b' } })).not.toBe(requestFingerprint({ ...base, body: { b: 'a' } }));
    expect(requestFingerprint({ ...base, body: { 'a,"b":': 'c' } })).not.toBe(requestFingerprint({ ...base, body: { a: '', b: 'c' } }));
  });

  it('refuses circular bodies', () => {
    const body: Record<string, unknown> = {};
    body.self = body;
    expect(() => requestFingerprint({ ...base, body })).toThrow(TypeError);
  });
});

describe('isValidIdempotencyKey', () => {
  it('accepts printable ASCII 0x21-0x7E of length 1-255', () => {
    expect(isValidIdempotencyKey('a')).toBe(true);
    expect(isValidIdempotencyKey('!')).toBe(true); // 0x21
    expect(isValidIdempotencyKey('~')).toBe(true); // 0x7E
    expect(isValidIdempotencyKey('x'.repeat(255))).toBe(true);
    let all = '';
    for (let c = 0x21; c <= 0x7e; c++) all += String.fromCharCode(c);
    expect(isValidIdempotencyKey(all)).toBe(true);
    expect(isValidIdempotencyKey('550e8400-e29b-41d4-a716-446655440000')).toBe(true);
  });

  it('refuses empty, too long, space, DEL, control and non-ASCII keys', () => {
    expect(isValidIdempotencyKey('')).toBe(false);
    expect(isValidIdempotencyKey('x'.repeat(256))).toBe(false);
    expect(isValidIdempotencyKey(' ')).toBe(false); // 0x20
    expect(isValidIdempotencyKey('a b')).toBe(false);
    expect(isValidIdempotencyKey('a\x7F')).toBe(false); // 0x7F
    expect(isValidIdempotencyKey('a\tb')).toBe(false);
    expect(isValidIdempotencyKey('key\n')).toBe(false);
    expect(isValidIdempotencyKey('clé')).toBe(false);
  });
});
