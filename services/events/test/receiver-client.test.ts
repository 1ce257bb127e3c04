/**
 * The client that sends deliveries, against real HTTP servers on loopback: redirects are never
 * followed, a silent receiver times out, outside the local fleet no connection is made to a
 * loopback address, whether written as an address or reached through a name, and in no fleet to
 * a link-local or unspecified one.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ReceiverClient } from '../src/http/receiver-client';

let server: http.Server;
let port = 0;
const hits: string[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    if (req.url === '/moved') res.writeHead(302, { location: `http://127.0.0.1:${port}/ok` }).end();
    else if (req.url === '/silent') return;
    else res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const local = new ReceiverClient({ policy: { local: true }, timeoutMs: 300, maxSocketsPerHost: 4 });
const production = new ReceiverClient({ policy: { local: false }, timeoutMs: 300, maxSocketsPerHost: 4 });
afterAll(() => {
  local.close();
  production.close();
});

it('posts and takes a 2xx as success', async () => {
  expect(await local.post(`http://127.0.0.1:${port}/ok`, { 'content-type': 'application/json' }, '{}')).toEqual({ status: 204, error: null });
});

it('never follows a redirect: the attempt fails and the target is not asked', async () => {
  hits.length = 0;
  expect(await local.post(`http://127.0.0.1:${port}/moved`, {}, '{}')).toEqual({ status: 302, error: 'redirects are not followed' });
  expect(hits).toEqual(['/moved']);
});

it('gives up on a receiver that does not answer within the timeout', async () => {
  expect(await local.post(`http://127.0.0.1:${port}/silent`, {}, '{}')).toEqual({ status: null, error: 'no answer within 300 ms' });
});

it('outside the local fleet, connects to no loopback address, by address or by name', async () => {
  hits.length = 0;
  expect(await production.post(`http://127.0.0.1:${port}/ok`, {}, '{}')).toEqual({ status: null, error: 'address 127.0.0.1 is not allowed' });
  expect(await production.post(`http://localhost:${port}/ok`, {}, '{}')).toMatchObject({ status: null, error: 'localhost resolves to no allowed address' });
  expect(hits).toEqual([]);
});

it('in the local fleet too, connects to no link-local or unspecified address', async () => {
  hits.length = 0;
  expect(await local.post('http://169.254.169.254/latest/meta-data', {}, '{}')).toEqual({ status: null, error: 'address 169.254.169.254 is not allowed' });
  // 0.0.0.0 would reach this machine's own servers.
  expect(await local.post(`http://0.0.0.0:${port}/ok`, {}, '{}')).toEqual({ status: null, error: 'address 0.0.0.0 is not allowed' });
  expect(await local.post(`http://[::]:${port}/ok`, {}, '{}')).toEqual({ status: null, error: 'address :: is not allowed' });
  expect(hits).toEqual([]);
});
