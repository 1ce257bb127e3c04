import { connect, JSONCodec } from 'nats';
import { Bus, ConflictError, ForbiddenError, ServiceUnavailableError, createLogger } from '@fleet/service-kit';
import type { RequestEnvelope } from '@fleet/contracts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const logger = createLogger('bus-test', 'silent');
const unique = `t${process.pid}${Date.now().toString(36)}`;
const envelope = (body?: Record<string, unknown>): RequestEnvelope => ({ request_id: 'req-1', params: {}, query: {}, body });

describe('Bus', () => {
  let server: Bus;
  let client: Bus;

  beforeAll(async () => {
    server = await Bus.connect({ servers: NATS_URL, service: `svc-${unique}`, logger, requestTimeoutMs: 300 });
    client = await Bus.connect({ servers: NATS_URL, service: `client-${unique}`, logger, requestTimeoutMs: 300 });
  });
  afterAll(async () => {
    await server.drain();
    await client.drain();
  });

  it('carries a request envelope to a handler and the reply back', async () => {
    server.serve(`${unique}.echo.get`, async (req) => ({ status: 201, body: { got: req.body }, headers: { Location: '/x' } }));
    await server.connection.flush();
    const reply = await client.request(`${unique}.echo.get`, envelope({ a: 1 }));
    expect(reply).toEqual({ ok: true, status: 201, body: { got: { a: 1 } }, headers: { Location: '/x' } });
  });

  it('turns thrown API errors into error replies with their code and extras', async () => {
    server.serve(`${unique}.err.get`, async () => {
      throw new ForbiddenError('no', 'forbidden', 'raw_commands');
    });
    server.serve(`${unique}.conflict.get`, async () => {
      throw new ConflictError('offline', 'device_offline', { status: 'disconnected' });
    });
    await server.connection.flush();
    expect(await client.request(`${unique}.err.get`, envelope())).toEqual({
      ok: false,
      error: { status: 403, code: 'forbidden', message: 'no', required_permission: 'raw_commands' },
    });
    const conflict = await client.request(`${unique}.conflict.get`, envelope());
    expect(conflict.ok === false && conflict.error.extra).toEqual({ status: 'disconnected' });
  });

  it('hides unexpected failures behind internal_error', async () => {
    server.serve(`${unique}.boom.get`, async () => {
      throw new Error('database password is hunter2');
    });
    await server.connection.flush();
    const reply = await client.request(`${unique}.boom.get`, envelope());
    expect(reply).toEqual({ ok: false, error: { status: 500, code: 'internal_error', message: 'Internal error.' } });
  });

  it('answers a malformed request envelope with an error instead of calling the handler', async () => {
    const handler = jest.fn(async () => ({}));
    server.serve(`${unique}.strict.get`, handler);
    await server.connection.flush();
    const raw = await client.connection.request(`${unique}.strict.get`, JSONCodec().encode({ nope: true }), { timeout: 1000 });
    expect(JSONCodec().decode(raw.data)).toMatchObject({ ok: false, error: { status: 500 } });
    expect(handler).not.toHaveBeenCalled();
  });

  it('fails fast with 503 when nobody serves the subject', async () => {
    const started = Date.now();
    await expect(client.request(`${unique}.nobody.get`, envelope())).rejects.toBeInstanceOf(ServiceUnavailableError);
    expect(Date.now() - started).toBeLessThan(250);
  });

  it('gives 503 within the timeout when the handler is slow', async () => {
    server.serve(`${unique}.slow.get`, () => new Promise((resolve) => setTimeout(() => resolve({}), 600)));
    await server.connection.flush();
    const started = Date.now();
    await expect(client.request(`${unique}.slow.get`, envelope(), { timeoutMs: 200 })).rejects.toMatchObject({ status: 503 });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('opens the circuit after repeated failures and then fails without waiting', async () => {
    const subject = `${unique}.flaky.get`;
    for (let i = 0; i < 12; i++) await client.request(subject, envelope()).catch(() => undefined);
    // A responder now exists, but the open breaker refuses before asking it.
    server.serve(subject, async () => ({ body: { fine: true } }));
    await server.connection.flush();
    await expect(client.request(subject, envelope())).rejects.toBeInstanceOf(ServiceUnavailableError);
  });

  it('shares requests across replicas in the queue group', async () => {
    const replica = await Bus.connect({ servers: NATS_URL, service: `svc-${unique}`, logger, requestTimeoutMs: 300 });
    const seen = new Set<string>();
    server.serve(`${unique}.shared.get`, async () => (seen.add('a'), { body: { by: 'a' } }));
    replica.serve(`${unique}.shared.get`, async () => (seen.add('b'), { body: { by: 'b' } }));
    await server.connection.flush();
    await replica.connection.flush();
    const bodies = await Promise.all(Array.from({ length: 40 }, () => client.request(`${unique}.shared.get`, envelope())));
    expect(bodies.every((r) => r.ok)).toBe(true);
    expect(seen).toEqual(new Set(['a', 'b']));
    await replica.drain();
  });

  it('delivers validated events to every subscriber and drops malformed ones', async () => {
    const other = await connect({ servers: NATS_URL });
    const received: unknown[] = [];
    server.subscribe('evt.registry.device.changed.v1', (e) => received.push(e));
    await server.connection.flush();
    const event = { device_id: '0123456789AB', change: 'moved', at: new Date().toISOString() };
    other.publish('evt.registry.device.changed.v1', JSONCodec().encode({ device_id: 'bad' }));
    client.publish('evt.registry.device.changed.v1', event);
    await client.connection.flush();
    await new Promise((r) => setTimeout(r, 100));
    expect(received).toEqual([event]);
    expect(() => client.publish('evt.registry.device.changed.v1', { device_id: 'x' })).toThrow();
    await other.close();
  });
});
