/**
 * "The database is stopped while the service runs", for one test file: a TCP proxy in front of
 * the test database that the test can cut (every connection dropped, new ones refused) and
 * restore, and the check every service's suite runs through it: each request subject the
 * service serves answers 503 service_unavailable, within a bounded time, while its database is
 * out of reach.
 */
import net from 'node:net';
import type { ReplyEnvelope, RequestEnvelope, RequestSubject } from '@fleet/contracts';

export interface CuttableDatabase {
  /** The database URL through the proxy (give it to the service's Prisma client). */
  url: string;
  /** Drops every open connection and refuses new ones, as a stopped Postgres does. */
  cut(): void;
  /**
   * Keeps every connection open, and takes new ones, but passes nothing either way until
   * restored, as a paused server (or a partition) does: a client sees no error, only silence.
   */
  stall(): void;
  /** Accepts connections again, and passes what a stall held back. */
  restore(): void;
  close(): Promise<void>;
}

/**
 * A proxy on a free local port in front of the server at `serverUrl` (a database URL, or any
 * URL with a host and port: Redis, NATS).
 */
export async function cuttableDatabase(serverUrl: string): Promise<CuttableDatabase> {
  const target = new URL(serverUrl);
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  let open = true;
  let stalled = false;
  const flow = (pair: { client: net.Socket; upstream: net.Socket }) => {
    pair.client.pipe(pair.upstream);
    pair.upstream.pipe(pair.client);
  };
  const hold = ({ client, upstream }: { client: net.Socket; upstream: net.Socket }) => {
    client.unpipe(upstream);
    upstream.unpipe(client);
    client.pause();
    upstream.pause();
  };
  const server = net.createServer((client) => {
    if (!open) return void client.destroy();
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    const pair = { client, upstream };
    pairs.add(pair);
    for (const s of [client, upstream]) {
      s.on('close', () => pairs.delete(pair));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    if (stalled) hold(pair);
    else flow(pair);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(serverUrl);
  proxied.hostname = '127.0.0.1';
  proxied.port = String((server.address() as net.AddressInfo).port);
  const destroyAll = () => {
    for (const { client, upstream } of pairs) {
      client.destroy();
      upstream.destroy();
    }
  };
  return {
    url: proxied.toString(),
    cut: () => {
      open = false;
      destroyAll();
    },
    stall: () => {
      if (stalled) return;
      stalled = true;
      for (const pair of pairs) hold(pair);
    },
    restore: () => {
      open = true;
      if (!stalled) return;
      stalled = false;
      for (const pair of pairs) flow(pair);
    },
    close: async () => {
      open = false;
      destroyAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What the check needs of a bus: one request, answered with the reply envelope. */
export interface Requester {
  request(subject: RequestSubject, envelope: RequestEnvelope, options?: { timeoutMs?: number }): Promise<ReplyEnvelope>;
}

/**
 * Sends every request and returns the ones not answered 503 service_unavailable within
 * `withinMs` (empty when the service behaves), as `subject: what came back`.
 */
export async function answersNotUnavailable(bus: Requester, requests: Array<{ subject: RequestSubject; envelope: RequestEnvelope }>, withinMs = 8000): Promise<string[]> {
  const wrong: string[] = [];
  for (const { subject, envelope } of requests) {
    const started = Date.now();
    let reply: ReplyEnvelope;
    try {
      reply = await bus.request(subject, envelope, { timeoutMs: withinMs });
    } catch (err) {
      wrong.push(`${subject}: no answer in ${withinMs} ms (${(err as Error).message})`);
      continue;
    }
    const took = Date.now() - started;
    if (reply.ok) wrong.push(`${subject}: ${reply.status}`);
    else if (reply.error.status !== 503 || reply.error.code !== 'service_unavailable') wrong.push(`${subject}: ${reply.error.status} ${reply.error.code}`);
    else if (took > withinMs) wrong.push(`${subject}: 503 after ${took} ms`);
  }
  return wrong;
}
