import { connect, headers as natsHeaders, JSONCodec } from 'nats';
import { testSubject } from '@fleet/test-kit';
import { Bus, ConflictError, ForbiddenError, JsonBody, NotDeliveredError, ServiceUnavailableError, createLogger, metricsRegistry } from '@fleet/service-kit';
import type { DeviceChangedEvent, RequestEnvelope } from '@fleet/contracts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const logger = createLogger('bus-test', 'silent');
const unique = `t${process.pid}${Date.now().toString(36)}`;
const subject = (name: string) => testSubject(`${unique}.${name}`);
const envelope = (body?: Record<string, unknown>): RequestEnvelope => ({ request_id: 'req-1', params: {}, query: {}, body });

describe('Bus', () => {
  let server: Bus;
  let client: Bus;

  // Time-outs are asked for explicitly where a test is about them; the default leaves room for
  // a machine busy with the rest of the suite (a reply right after 1.5 MB of pages took over 300 ms).
  beforeAll(async () => {
    server = await Bus.connect({ servers: NATS_URL, service: `svc-${unique}`, logger, requestTimeoutMs: 3000 });
    client = await Bus.connect({ servers: NATS_URL, service: `client-${unique}`, logger, requestTimeoutMs: 3000 });
  });
  afterAll(async () => {
    await server.drain();
    await client.drain();
  });

  it('carries a request envelope to a handler and the reply back', async () => {
    server.serve(subject('echo.get'), async (req) => ({ status: 201, body: { got: req.body }, headers: { Location: '/x' } }));
    await server.connection.flush();
    const reply = await client.request(subject('echo.get'), envelope({ a: 1 }));
    expect(reply).toEqual({ ok: true, status: 201, body: { got: { a: 1 } }, headers: { Location: '/x' } });
  });

  it('carries a body written as JSON text: parsed for request(), its very bytes for relay(), an ordinary envelope to any other caller', async () => {
    const page = { records: Array.from({ length: 300 }, (_, k) => ({ seq: k, name: `r\u00e9cord "${k}"`, at: null })), has_more: false };
    server.serve(subject('page.get'), async () => ({ status: 200, headers: { 'Cache-Control': 'no-store' }, body: JsonBody.of(page) }));
    await server.connection.flush();
    expect(await client.request(subject('page.get'), envelope())).toEqual({ ok: true, status: 200, headers: { 'Cache-Control': 'no-store' }, body: page });
    const relayed = await client.relay(subject('page.get'), envelope());
    if (!relayed.ok || !(relayed.body instanceof JsonBody)) throw new Error(`expected a JsonBody, got ${JSON.stringify(relayed)}`);
    expect(Buffer.from(relayed.body.bytes).toString('utf8')).toBe(JSON.stringify(page));
    expect(relayed).toMatchObject({ ok: true, status: 200, headers: { 'Cache-Control': 'no-store' } });
    // A caller that asks in neither form (another client, an older version) gets the plain envelope.
    const raw = await client.connection.request(subject('page.get'), JSONCodec().encode(envelope()), { timeout: 1000 });
    expect(raw.headers).toBeUndefined();
    expect(JSONCodec().decode(raw.data)).toEqual({ ok: true, status: 200, headers: { 'Cache-Control': 'no-store' }, body: page });
  });

  it('carries a reply larger than a bus message may be, in parts, whether its body is JSON text or not', async () => {
    const maxPayload = server.connection.info?.max_payload ?? 1024 * 1024;
    const devices = (n: number) => ({ devices: Array.from({ length: n }, (_, k) => ({ device_id: `D${k.toString(16).padStart(11, '0')}`, name: `lamp ${k} \u00e9` })) });
    const n = Math.ceil((maxPayload * 2.5) / 40);
    server.serve(subject('huge.get'), async (req) => ((req.body as { text?: boolean }).text ? { body: JsonBody.of(devices(n)) } : { body: devices(n) }));
    await server.connection.flush();
    const plain = await client.request(subject('huge.get'), envelope({ text: false }), { timeoutMs: 10_000 });
    expect(plain).toEqual({ ok: true, status: 200, body: devices(n) });
    const relayed = await client.relay(subject('huge.get'), envelope({ text: true }), { timeoutMs: 10_000 });
    if (!relayed.ok || !(relayed.body instanceof JsonBody)) throw new Error('expected a JsonBody');
    expect(relayed.body.bytes.byteLength).toBeGreaterThan(maxPayload * 2);
    expect(Buffer.from(relayed.body.bytes).toString('utf8')).toBe(JSON.stringify(devices(n)));
  });

  it('answers 503 when a part of a reply is no longer held by its replier', async () => {
    // A replier whose first part names a parts subject nobody serves (it stopped, or the parts expired).
    const raw = await connect({ servers: NATS_URL });
    raw.subscribe(subject('parts.gone'), {
      callback: (_err, msg) => {
        const h = natsHeaders();
        h.set('Fleet-Parts', '3');
        h.set('Fleet-Parts-Subject', `_INBOX.gone.${unique}.1`);
        msg.respond(Buffer.from('{"ok":true,"status":200,"bo'), { headers: h });
      },
    });
    await raw.flush();
    const failure: unknown = await client.request(subject('parts.gone'), envelope(), { timeoutMs: 3000 }).catch((err: unknown) => err);
    // The handler ran: not "nothing received it", which would tell the caller a retry is harmless.
    expect(failure).toBeInstanceOf(ServiceUnavailableError);
    expect(failure).not.toBeInstanceOf(NotDeliveredError);
    await raw.close();
  });

  it('goes on serving when a reply cannot be sent at all', async () => {
    const replier = await Bus.connect({ servers: NATS_URL, service: `closing-${unique}`, logger, requestTimeoutMs: 3000 });
    let handled = false;
    replier.serve(subject('closing.get'), async () => {
      await replier.connection.close();
      handled = true;
      return { body: { late: true } };
    });
    await replier.connection.flush();
    await expect(client.request(subject('closing.get'), envelope(), { timeoutMs: 1000 })).rejects.toBeInstanceOf(ServiceUnavailableError);
    // The reply on a closed connection threw inside the bus, which caught it: this process is still here to check.
    expect(handled).toBe(true);
  });

  it('carries replies of hundreds of kilobytes (many socket reads each) byte for byte, several at once', async () => {
    const pageOf = (n: number) => ({ records: Array.from({ length: n }, (_, k) => ({ seq: k, v: [230.1 + k, 228.4, 231.9], sid: `s${n}` })), has_more: n % 2 === 0 });
    server.serve(subject('big.get'), async (req) => ({ body: JsonBody.of(pageOf(Number((req.body as { n: number }).n))) }));
    await server.connection.flush();
    const sizes = [9000, 1, 14000, 3000, 11000];
    // Building and carrying 1.5 MB can take seconds on a loaded machine; the test is about the bytes.
    const replies = await Promise.all(sizes.map((n) => client.relay(subject('big.get'), envelope({ n }), { timeoutMs: 5000 })));
    replies.forEach((relayed, k) => {
      if (!relayed.ok || !(relayed.body instanceof JsonBody)) throw new Error('expected a JsonBody');
      expect(Buffer.from(relayed.body.bytes).toString('utf8')).toBe(JSON.stringify(pageOf(sizes[k] as number)));
    });
    expect(replies[2]?.ok && (replies[2].body as JsonBody).bytes.byteLength).toBeGreaterThan(500_000);
  });

  it('relays errors and ordinary bodies as request() does', async () => {
    server.serve(subject('plain.get'), async () => ({ body: { n: 1 } }));
    server.serve(subject('refused.get'), async () => {
      throw new ConflictError('offline', 'device_offline');
    });
    await server.connection.flush();
    expect(await client.relay(subject('plain.get'), envelope())).toEqual({ ok: true, status: 200, body: { n: 1 } });
    expect(await client.relay(subject('refused.get'), envelope())).toMatchObject({ ok: false, error: { status: 409, code: 'device_offline' } });
  });

  it('counts and times what it handles and sends, by subject and outcome', async () => {
    // A series' value; a histogram's count is its `<name>_count` series.
    const value = async (name: string, labels: Record<string, string>) => {
      const family = name.replace(/_count$/, '');
      const metric = (await metricsRegistry.getMetricsAsJSON()).find((m) => m.name === family);
      const values = (metric?.values ?? []) as Array<{ value: number; labels: Record<string, unknown>; metricName?: string }>;
      const match = values.find((v) => (v.metricName ?? family) === name && Object.entries(labels).every(([k, x]) => v.labels[k] === x));
      return match?.value ?? 0;
    };
    const ok = subject('metrics.ok');
    const refused = subject('metrics.refused');
    server.serve(ok, async () => ({ body: {} }));
    server.serve(refused, async () => {
      throw new ConflictError('no', 'device_offline');
    });
    await server.connection.flush();
    const before = await value('fleet_bus_handled_total', { subject: ok, outcome: 'ok' });
    await client.request(ok, envelope());
    await client.request(ok, envelope());
    await client.request(refused, envelope());
    await expect(client.request(subject('metrics.nobody'), envelope())).rejects.toBeInstanceOf(ServiceUnavailableError);
    expect(await value('fleet_bus_handled_total', { subject: ok, outcome: 'ok' })).toBe(before + 2);
    expect(await value('fleet_bus_handled_total', { subject: refused, outcome: 'device_offline' })).toBe(1);
    expect(await value('fleet_bus_requests_total', { subject: refused, outcome: 'device_offline' })).toBe(1);
    expect(await value('fleet_bus_requests_total', { subject: subject('metrics.nobody'), outcome: 'unavailable' })).toBe(1);
    expect(await value('fleet_bus_handler_duration_seconds_count', { subject: ok })).toBe(before + 2);
    expect(await value('fleet_bus_circuit_state', { subject: ok })).toBe(0);
  });

  it('turns thrown API errors into error replies with their code and extras', async () => {
    server.serve(subject('err.get'), async () => {
      throw new ForbiddenError('no', 'forbidden', 'raw_commands');
    });
    server.serve(subject('conflict.get'), async () => {
      throw new ConflictError('offline', 'device_offline', { status: 'disconnected' });
    });
    await server.connection.flush();
    expect(await client.request(subject('err.get'), envelope())).toEqual({
      ok: false,
      error: { status: 403, code: 'forbidden', message: 'no', required_permission: 'raw_commands' },
    });
    const conflict = await client.request(subject('conflict.get'), envelope());
    expect(conflict.ok === false && conflict.error.extra).toEqual({ status: 'disconnected' });
  });

  it('hides unexpected failures behind internal_error', async () => {
    server.serve(subject('boom.get'), async () => {
      throw new Error('database password is hunter2');
    });
    await server.connection.flush();
    const reply = await client.request(subject('boom.get'), envelope());
    expect(reply).toEqual({ ok: false, error: { status: 500, code: 'internal_error', message: 'Internal error.' } });
  });

  it('answers a malformed request envelope with an error instead of calling the handler', async () => {
    const handler = jest.fn(async () => ({}));
    server.serve(subject('strict.get'), handler);
    await server.connection.flush();
    const raw = await client.connection.request(subject('strict.get'), JSONCodec().encode({ nope: true }), { timeout: 1000 });
    expect(JSONCodec().decode(raw.data)).toMatchObject({ ok: false, error: { status: 500 } });
    expect(handler).not.toHaveBeenCalled();
  });

  it('fails fast with 503 when nobody serves the subject, telling the caller nothing received it', async () => {
    const started = Date.now();
    await expect(client.request(subject('nobody.get'), envelope())).rejects.toBeInstanceOf(NotDeliveredError);
    expect(Date.now() - started).toBeLessThan(250);
  });

  it('gives 503 within the timeout when the handler is slow', async () => {
    server.serve(subject('slow.get'), () => new Promise((resolve) => setTimeout(() => resolve({}), 600)));
    await server.connection.flush();
    const started = Date.now();
    const failure = await client.request(subject('slow.get'), envelope(), { timeoutMs: 200 }).catch((err: unknown) => err);
    expect(failure).toMatchObject({ status: 503 });
    // The handler received it: a timeout is no proof that nothing was done.
    expect(failure).not.toBeInstanceOf(NotDeliveredError);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('opens the circuit after repeated failures and then fails without waiting', async () => {
    const flaky = subject('flaky.get');
    for (let i = 0; i < 12; i++) await client.request(flaky, envelope()).catch(() => undefined);
    // A responder now exists, but the open breaker refuses before asking it.
    const handler = jest.fn(async () => ({ body: { fine: true } }));
    server.serve(flaky, handler);
    await server.connection.flush();
    await expect(client.request(flaky, envelope())).rejects.toBeInstanceOf(NotDeliveredError);
    expect(handler).not.toHaveBeenCalled();
  });

  it('shares requests across replicas in the queue group', async () => {
    const replica = await Bus.connect({ servers: NATS_URL, service: `svc-${unique}`, logger, requestTimeoutMs: 300 });
    const seen = new Set<string>();
    server.serve(subject('shared.get'), async () => (seen.add('a'), { body: { by: 'a' } }));
    replica.serve(subject('shared.get'), async () => (seen.add('b'), { body: { by: 'b' } }));
    await server.connection.flush();
    await replica.connection.flush();
    const bodies = await Promise.all(Array.from({ length: 40 }, () => client.request(subject('shared.get'), envelope())));
    expect(bodies.every((r) => r.ok)).toBe(true);
    expect(seen).toEqual(new Set(['a', 'b']));
    await replica.drain();
  });

  it('delivers validated events to every subscriber and drops malformed ones', async () => {
    const other = await connect({ servers: NATS_URL });
    const received: unknown[] = [];
    server.subscribe('evt.registry.device.changed.v1', (e) => received.push(e));
    await server.connection.flush();
    const event = { device_id: '0123456789AB', change: 'moved' as const, at: new Date().toISOString() };
    other.publish('evt.registry.device.changed.v1', JSONCodec().encode({ device_id: 'bad' }));
    client.publish('evt.registry.device.changed.v1', event);
    await client.connection.flush();
    await new Promise((r) => setTimeout(r, 100));
    expect(received).toEqual([event]);
    expect(() => client.publish('evt.registry.device.changed.v1', { device_id: 'x' } as unknown as DeviceChangedEvent)).toThrow();
    await other.close();
  });
});

describe('Bus contracts', () => {
  // A real subject with body and reply schemas, under a prefix of this run's own.
  const prefixed = (service: string) => Bus.connect({ servers: NATS_URL, service: `${service}-${unique}`, logger, requestTimeoutMs: 500, subjectPrefix: `${unique}.` });
  const connectivity = { status: 'connected' as const, status_changed_at: null, last_seen_at: null };
  let owner: Bus;
  let caller: Bus;
  let handled = 0;
  let answer: unknown = connectivity;

  beforeAll(async () => {
    owner = await prefixed('owner');
    caller = await prefixed('caller');
    owner.serve('registry.device.connectivity', async () => {
      handled += 1;
      return { body: answer as typeof connectivity };
    });
    await owner.connection.flush();
  });
  afterAll(async () => {
    await owner.drain();
    await caller.drain();
  });
  beforeEach(() => {
    handled = 0;
    answer = connectivity;
  });

  const ask = (body: unknown) => ({ request_id: 'req-c', params: {}, query: {}, body: body as { device_id: string } });

  it('serves and requests under its subject prefix', async () => {
    expect(await caller.request('registry.device.connectivity', ask({ device_id: '0123456789AB' }))).toEqual({ ok: true, status: 200, body: connectivity });
    const unprefixed = await Bus.connect({ servers: NATS_URL, service: `plain-${unique}`, logger, requestTimeoutMs: 300 });
    await expect(unprefixed.request('registry.device.connectivity', ask({ device_id: '0123456789AB' }))).rejects.toBeInstanceOf(ServiceUnavailableError);
    await unprefixed.drain();
  });

  it('refuses to send a body its schema refuses, and answers 400 to one that arrives anyway', async () => {
    await expect(caller.request('registry.device.connectivity', ask({ id: 1 }))).rejects.toThrow(/violates its contract/);
    const raw = await caller.connection.request(`${unique}.registry.device.connectivity`, JSONCodec().encode(ask({ id: 1 })), { timeout: 1000 });
    expect(JSONCodec().decode(raw.data)).toMatchObject({ ok: false, error: { status: 400, code: 'validation_error' } });
    expect(handled).toBe(0);
  });

  it('never sends a reply body its schema refuses: the owner answers 500, a caller that got one anyway 503', async () => {
    answer = { status: 'sleeping' };
    expect(await caller.request('registry.device.connectivity', ask({ device_id: '0123456789AB' }))).toMatchObject({ ok: false, error: { status: 500, code: 'internal_error' } });
    const liar = await Bus.connect({ servers: NATS_URL, service: `liar-${unique}`, logger, requestTimeoutMs: 500, subjectPrefix: `${unique}.liar.` });
    liar.connection.subscribe(`${unique}.liar.registry.device.connectivity`, { callback: (_e, m) => m.respond(JSONCodec().encode({ ok: true, status: 200, body: { status: 'sleeping' } })) });
    await liar.connection.flush();
    await expect(liar.request('registry.device.connectivity', ask({ device_id: '0123456789AB' }))).rejects.toBeInstanceOf(ServiceUnavailableError);
    await liar.drain();
  });

  it('checks a body written as JSON text against the reply schema all the same', async () => {
    owner.serve('registry.scope.resolve', async () => ({ body: JsonBody.of({ status: 'sleeping' }) }));
    await owner.connection.flush();
    const reply = await caller.relay('registry.scope.resolve', { request_id: 'req-h', params: {}, query: {} });
    expect(reply).toMatchObject({ ok: false, error: { status: 500, code: 'internal_error' } });
  });
});
