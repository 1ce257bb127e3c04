/**
 * The gateway's database (partners and keys) stopped while it runs: an authenticated request
 * is answered 503 service_unavailable quickly, never 500 and never 401 (a key is not unknown
 * because it could not be looked up); once the database is back, the same key works again.
 */
import { waitFor } from '@fleet/test-kit';
import { routes as realRoutes } from '../src/routes/table';
import { call, startTestGateway, type TestGateway } from './support/harness';

let gw: TestGateway;

beforeAll(async () => {
  gw = await startTestGateway(
    realRoutes.filter((r) => r.path === '/v1/account'),
    {},
    { cuttableDatabase: true },
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
