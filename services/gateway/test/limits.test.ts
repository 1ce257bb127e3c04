import { randomBytes } from 'node:crypto';
import Redis from 'ioredis';
import {
  DEFAULT_LIMIT_SETTINGS,
  rateLimitHeaders,
  requestWindowFor,
  SlidingWindowLimiter,
  windowsFor,
  type WindowSpec,
} from '../src/limits';

const PREFIX = `test:limits:${process.pid}:${randomBytes(4).toString('hex')}:`;
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: false });
const limiter = new SlidingWindowLimiter(redis, PREFIX);

let n = 0;
const freshKey = (name: string): string => `${name}:${++n}`;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

afterAll(async () => {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 1000);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  await redis.quit();
});

describe('SlidingWindowLimiter', () => {
  it('takes back a counted event by its receipt, in every window it was counted in', async () => {
    const a: WindowSpec = { key: freshKey('refund-a'), limit: 1, windowMs: 60_000 };
    const b: WindowSpec = { key: freshKey('refund-b'), limit: 5, windowMs: 60_000 };
    const first = await limiter.hit([a, b]);
    expect(first.receipt).toEqual(expect.any(String));
    expect((await limiter.hit([a, b])).allowed).toBe(false);
    await limiter.refund([a, b], first.receipt!);
    const again = await limiter.hit([a, b]);
    expect(again.allowed).toBe(true);
    expect(again.windows[1]!.remaining).toBe(4);
    expect((await limiter.peek([a])).receipt).toBeUndefined();
  });

  it('admits exactly `limit` events, counting remaining down, then refuses without counting', async () => {
    const w: WindowSpec = { key: freshKey('basic'), limit: 3, windowMs: 1500 };
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await limiter.hit([w]);
      expect(r.allowed).toBe(true);
      expect(r.refusedBy).toBeUndefined();
      const s = r.windows[0]!;
      expect(s).toMatchObject({ key: w.key, limit: 3, allowed: true, retryAfterSeconds: 0, resetSeconds: 2 });
      remaining.push(s.remaining);
    }
    expect(remaining).toEqual([2, 1, 0]);

    const refused = await limiter.hit([w]);
    expect(refused.allowed).toBe(false);
    const s = refused.windows[0]!;
    expect(s.allowed).toBe(false);
    expect(s.remaining).toBe(0);
    expect(s.resetSeconds).toBeGreaterThanOrEqual(1);
    expect(s.resetSeconds).toBeLessThanOrEqual(2);
    expect(s.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(s.retryAfterSeconds).toBeLessThanOrEqual(2);
    expect(refused.refusedBy).toEqual(s);
    // refused events are not counted
    expect(await redis.zcard(PREFIX + w.key)).toBe(3);
    expect(await redis.pttl(PREFIX + w.key)).toBeGreaterThan(0);
    expect(await redis.pttl(PREFIX + w.key)).toBeLessThanOrEqual(1500);
  });

  it('slides: an event leaves the window windowMs after it was counted', async () => {
    const w: WindowSpec = { key: freshKey('slide'), limit: 2, windowMs: 1000 };
    expect((await limiter.hit([w])).allowed).toBe(true);
    await sleep(500);
    expect((await limiter.hit([w])).allowed).toBe(true);
    const refused = await limiter.hit([w]);
    expect(refused.allowed).toBe(false);
    // the oldest event (about 0.5 s old) leaves in about 0.5 s
    expect(refused.windows[0]!.retryAfterSeconds).toBe(1);
    expect(refused.windows[0]!.resetSeconds).toBe(1);

    await sleep(560); // first event has left, second is ~0.56 s old
    const again = await limiter.hit([w]);
    expect(again.allowed).toBe(true);
    expect(again.windows[0]!.remaining).toBe(0);
    expect((await limiter.hit([w])).allowed).toBe(false);
    expect(await redis.zcard(PREFIX + w.key)).toBe(2);
  });

  it('retry-after waits for the (count-limit+1)-th oldest event when the limit was lowered', async () => {
    const key = freshKey('lowered');
    const big: WindowSpec = { key, limit: 3, windowMs: 1500 };
    await limiter.hit([big]);
    await sleep(700);
    await limiter.hit([big]);
    await limiter.hit([big]);
    // 3 counted (ages ~0.7 s, ~0, ~0); with limit 2 two must leave, the 2nd oldest leaves in ~1.5 s
    const small: WindowSpec = { key, limit: 2, windowMs: 1500 };
    const r = await limiter.hit([small]);
    expect(r.allowed).toBe(false);
    expect(r.windows[0]!.resetSeconds).toBe(1); // oldest leaves in ~0.8 s
    expect(r.windows[0]!.retryAfterSeconds).toBe(2);
    expect(r.windows[0]!.remaining).toBe(0);
  });

  it('counts nothing in any window when one of them refuses', async () => {
    const wide: WindowSpec = { key: freshKey('wide'), limit: 5, windowMs: 1500 };
    const narrow: WindowSpec = { key: freshKey('narrow'), limit: 2, windowMs: 1500 };
    expect((await limiter.hit([wide, narrow])).allowed).toBe(true);
    const second = await limiter.hit([wide, narrow]);
    expect(second.windows.map((s) => s.remaining)).toEqual([3, 0]);

    const refused = await limiter.hit([wide, narrow]);
    expect(refused.allowed).toBe(false);
    expect(refused.refusedBy?.key).toBe(narrow.key);
    expect(refused.windows[0]).toMatchObject({ key: wide.key, allowed: true, remaining: 3, retryAfterSeconds: 0 });
    expect(refused.windows[1]).toMatchObject({ key: narrow.key, allowed: false, remaining: 0 });
    expect(await redis.zcard(PREFIX + wide.key)).toBe(2);

    // the wide window alone still has its 3 events left
    const peek = await limiter.peek([wide]);
    expect(peek.windows[0]!.remaining).toBe(3);
  });

  it('admits exactly `limit` of 50 concurrent hits', async () => {
    const w: WindowSpec = { key: freshKey('concurrent'), limit: 10, windowMs: 1500 };
    const second = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    try {
      const other = new SlidingWindowLimiter(second, PREFIX);
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? limiter : other).hit([w])),
      );
      expect(results.filter((r) => r.allowed)).toHaveLength(10);
      expect(results.filter((r) => r.allowed).map((r) => r.windows[0]!.remaining).sort((a, b) => a - b)).toEqual([
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
      ]);
      expect(await redis.zcard(PREFIX + w.key)).toBe(10);
    } finally {
      await second.quit();
    }
  });

  it('counts stages in order: an earlier stage is counted while a later one refuses, never the reverse', async () => {
    const first: WindowSpec = { key: freshKey('stage-a'), limit: 2, windowMs: 60_000 };
    const second: WindowSpec = { key: freshKey('stage-b'), limit: 1, windowMs: 60_000 };
    const [a1, b1] = await limiter.hitStages([[first], [second]]);
    expect([a1?.allowed, b1?.allowed, a1?.windows[0]?.remaining, b1?.windows[0]?.remaining]).toEqual([true, true, 1, 0]);
    expect(b1?.receipt).toBeDefined();
    const [a2, b2] = await limiter.hitStages([[first], [second]]);
    // The second stage refuses: the first is counted all the same, with a receipt of its own stage only.
    expect([a2?.allowed, a2?.windows[0]?.remaining, b2?.allowed, b2?.receipt]).toEqual([true, 0, false, undefined]);
    expect(a2?.receipt).toBeDefined();
    expect((await limiter.peek([first])).windows[0]?.remaining).toBe(0);
    // The first stage refuses: nothing is counted in the second either.
    const fresh: WindowSpec = { key: freshKey('stage-c'), limit: 5, windowMs: 60_000 };
    const [a3, c3] = await limiter.hitStages([[first], [fresh]]);
    expect([a3?.allowed, c3?.allowed]).toEqual([false, true]);
    expect((await limiter.peek([fresh])).windows[0]?.remaining).toBe(5);
    // A receipt refunds the stage it names.
    await limiter.refund([second], b1?.receipt as string);
    expect((await limiter.peek([second])).windows[0]?.remaining).toBe(1);
  });

  it('peek reports the state without counting', async () => {
    const w: WindowSpec = { key: freshKey('peek'), limit: 2, windowMs: 1500 };
    const empty = await limiter.peek([w]);
    expect(empty).toEqual({
      allowed: true,
      windows: [{ key: w.key, limit: 2, allowed: true, remaining: 2, resetSeconds: 0, retryAfterSeconds: 0 }],
    });
    expect(await redis.exists(PREFIX + w.key)).toBe(0);

    await limiter.hit([w]);
    for (let i = 0; i < 3; i++) {
      const p = await limiter.peek([w]);
      expect(p.windows[0]).toMatchObject({ remaining: 1, allowed: true, resetSeconds: 2 });
    }
    await limiter.hit([w]);
    const full = await limiter.peek([w]);
    expect(full.allowed).toBe(false);
    expect(full.refusedBy).toMatchObject({ key: w.key, remaining: 0 });
    expect(full.refusedBy!.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(await redis.zcard(PREFIX + w.key)).toBe(2);
  });

  it('keeps events of the same instant apart', async () => {
    const w: WindowSpec = { key: freshKey('same-instant'), limit: 100, windowMs: 1500 };
    const results = await Promise.all(Array.from({ length: 20 }, () => limiter.hit([w])));
    expect(results.every((r) => r.allowed)).toBe(true);
    expect(await redis.zcard(PREFIX + w.key)).toBe(20);
  });

  it('refuses every event of a zero limit and rejects malformed windows', async () => {
    const zero = await limiter.hit([{ key: freshKey('zero'), limit: 0, windowMs: 2000 }]);
    expect(zero.allowed).toBe(false);
    expect(zero.windows[0]).toMatchObject({ remaining: 0, resetSeconds: 0, retryAfterSeconds: 2 });
    await expect(limiter.hit([])).rejects.toThrow(RangeError);
    await expect(limiter.hit([{ key: 'x', limit: 1.5, windowMs: 1000 }])).rejects.toThrow(RangeError);
    await expect(limiter.hit([{ key: 'x', limit: 1, windowMs: 0 }])).rejects.toThrow(RangeError);
    await expect(
      limiter.hit([
        { key: 'dup', limit: 1, windowMs: 1000 },
        { key: 'dup', limit: 2, windowMs: 1000 },
      ]),
    ).rejects.toThrow(RangeError);
  });

  it('turns a window state into RateLimit headers', () => {
    expect(rateLimitHeaders({ key: 'k', limit: 10, remaining: 4, resetSeconds: 12, retryAfterSeconds: 0, allowed: true })).toEqual({
      'RateLimit-Limit': '10',
      'RateLimit-Remaining': '4',
      'RateLimit-Reset': '12',
    });
    expect(rateLimitHeaders({ key: 'k', limit: 10, remaining: 0, resetSeconds: 30, retryAfterSeconds: 7, allowed: false })).toEqual({
      'RateLimit-Limit': '10',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '30',
      'Retry-After': '7',
    });
  });
});

describe('windowsFor', () => {
  const settings = DEFAULT_LIMIT_SETTINGS;

  it('has the documented defaults', () => {
    expect(DEFAULT_LIMIT_SETTINGS).toEqual({ configMutationsPerMin: 30, destructivePerHour: 20, deviceCeilingPerMin: 120 });
  });

  it('spends a device command from the partner+device window and the device ceiling shared by partners', () => {
    const a = windowsFor('device_command', { partnerId: 'p1', deviceId: '0123456789AB', deviceCommandsPerMin: 60 }, settings);
    const b = windowsFor('device_command', { partnerId: 'p2', deviceId: '0123456789AB', deviceCommandsPerMin: 10 }, settings);
    expect(a).toHaveLength(2);
    expect(a[0]).toMatchObject({ limit: 60, windowMs: 60_000 });
    expect(a[1]).toMatchObject({ limit: 120, windowMs: 60_000 });
    expect(b[0]).toMatchObject({ limit: 10, windowMs: 60_000 });
    expect(a[0]!.key).not.toBe(b[0]!.key); // per partner
    expect(a[1]!.key).toBe(b[1]!.key); // shared ceiling
    const other = windowsFor('device_command', { partnerId: 'p1', deviceId: 'BA9876543210', deviceCommandsPerMin: 60 }, settings);
    expect(other[0]!.key).not.toBe(a[0]!.key);
    expect(other[1]!.key).not.toBe(a[1]!.key);
    expect(() => windowsFor('device_command', { partnerId: 'p1', deviceCommandsPerMin: 60 }, settings)).toThrow(TypeError);
  });

  it('keeps partner and device ids containing separators apart', () => {
    const x = windowsFor('device_command', { partnerId: 'a:b', deviceId: 'c', deviceCommandsPerMin: 1 }, settings);
    const y = windowsFor('device_command', { partnerId: 'a', deviceId: 'b:c', deviceCommandsPerMin: 1 }, settings);
    expect(x[0]!.key).not.toBe(y[0]!.key);
  });

  it('spends config mutations per partner per minute and destructive calls per partner per hour', () => {
    const ctx = { partnerId: 'p1', deviceId: '0123456789AB', deviceCommandsPerMin: 60 };
    const custom = { configMutationsPerMin: 7, destructivePerHour: 3, deviceCeilingPerMin: 50 };
    const cfg = windowsFor('config_mutation', ctx, custom);
    const destr = windowsFor('destructive', ctx, custom);
    expect(cfg).toEqual([{ key: expect.any(String), limit: 7, windowMs: 60_000 }]);
    expect(destr).toEqual([{ key: expect.any(String), limit: 3, windowMs: 3_600_000 }]);
    expect(cfg[0]!.key).not.toBe(destr[0]!.key);
    expect(windowsFor('config_mutation', { ...ctx, deviceId: 'FFFFFFFFFFFF' }, custom)[0]!.key).toBe(cfg[0]!.key);
    expect(windowsFor('config_mutation', { ...ctx, partnerId: 'p2' }, custom)[0]!.key).not.toBe(cfg[0]!.key);
    const req = requestWindowFor({ partnerId: 'p1', requestsPerMin: 600 });
    expect(req).toMatchObject({ limit: 600, windowMs: 60_000 });
    expect([cfg[0]!.key, destr[0]!.key]).not.toContain(req.key);
  });
});
