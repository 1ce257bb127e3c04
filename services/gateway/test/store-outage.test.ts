/**
 * The gateway's database (partners and keys) stopped, or stalled (connections open, nothing
 * answered, as a paused server or a partition), while it runs, and Redis stalled: an
 * authenticated request is answered 503 service_unavailable within a bounded time, never 500,
 * never 401 (a key is not unknown because it could not be looked up) and never left waiting;
 * once the store is back, the same key works again.
 */
import { waitFor } from '@fleet/test-kit';
import { routes as realRoutes } from '../src/routes/table';
import { call, startTestGateway, type TestGateway } from './support/harness';

let gw: TestGateway;

beforeAll(async () => {
  gw = await startTestGateway(
    realRoutes.filter((r) => r.path === '/v1/account'),
    {},
    { cuttableDatabase: true, cuttableRedis: true },
  );
});

afterAll(async () => {
  await gw?.close();
});

it('answers 503 while its database is stopped, whether or not the key was seen before, and recovers', async () => {
  const seen = await gw.partner(['--permissions', 'all']);
  const unseen = await gw.partner(['--permissions', 'all']);
  expect((await call(gw.url, 'GET', '/v1/account', { key: seen.key })).status).toBe(200);

  gw.proxy!.cut();
  for (const key of [seen.key, unseen.key]) {
    const started = Date.now();
    const res = await call(gw.url, 'GET', '/v1/account', { key });
    expect({ status: res.status, code: res.body.code }).toEqual({ status: 503, code: 'service_unavailable' });
    expect(Date.now() - started).toBeLessThan(8000);
  }

  gw.proxy!.restore();
  await waitFor(async () => (await call(gw.url, 'GET', '/v1/account', { key: unseen.key })).status === 200, { timeoutMs: 15_000, what: 'the gateway answering again' });
  expect((await call(gw.url, 'GET', '/v1/account', { key: seen.key })).status).toBe(200);
}, 60_000);

it('answers 503 within a bounded time while its database stalls, and recovers', async () => {
  const seen = await gw.partner(['--permissions', 'all']);
  const unseen = await gw.partner(['--permissions', 'all']);
  expect((await call(gw.url, 'GET', '/v1/account', { key: seen.key })).status).toBe(200);
  gw.proxy!.stall();
  const started = Date.now();
  // A key not cached must be looked up: the lookup gives up instead of waiting for an answer.
  const res = await call(gw.url, 'GET', '/v1/account', { key: unseen.key });
  expect({ status: res.status, code: res.body.code }).toEqual({ status: 503, code: 'service_unavailable' });
  expect(Date.now() - started).toBeLessThan(8000);
  gw.proxy!.restore();
  await waitFor(async () => (await call(gw.url, 'GET', '/v1/account', { key: unseen.key })).status === 200, { timeoutMs: 15_000, what: 'the gateway answering again' });
}, 60_000);

it('answers 503 within a bounded time while Redis stalls, and recovers', async () => {
  const p = await gw.partner(['--permissions', 'all']);
  expect((await call(gw.url, 'GET', '/v1/account', { key: p.key })).status).toBe(200);
  gw.redisProxy!.stall();
  const started = Date.now();
  // Every request spends from its rate-limit window in Redis first.
  const res = await call(gw.url, 'GET', '/v1/account', { key: p.key });
  expect({ status: res.status, code: res.body.code }).toEqual({ status: 503, code: 'service_unavailable' });
  expect(res.headers.get('retry-after')).not.toBeNull();
  expect(Date.now() - started).toBeLessThan(8000);
  gw.redisProxy!.restore();
  await waitFor(async () => (await call(gw.url, 'GET', '/v1/account', { key: p.key })).status === 200, { timeoutMs: 15_000, what: 'the gateway answering again' });
}, 60_000);
