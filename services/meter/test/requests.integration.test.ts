/**
 * Report, live reading and energy reset requests on real NATS, JetStream and Postgres, with
 * stand-ins for the bridge (`bridge.message.publish`) and the registry
 * (`registry.device.connectivity`) under a subject prefix of this file's own, called through
 * the same clients the service uses.
 */
import type { JetStreamClient } from 'nats';
import type { RequestEnvelope } from '@fleet/contracts';
import { BridgeClient } from '@fleet/bridge-client';
import { RegistryClient } from '@fleet/registry-client';
import { ApiError, type Bus, DurablePullConsumer } from '@fleet/service-kit';
import { answersNotUnavailable, BridgeStandIn, cuttableDatabase, randomDeviceId, RegistryStandIn, uniqueId, waitFor, rejectionOf } from '@fleet/test-kit';
import { deviceInProcessor } from '../src/handlers/device-in';
import { getReset, getSample, requestReset, requestSample, sendReport, type RequestDeps } from '../src/handlers/requests';
import { METER_SUBJECTS, serveMeter } from '../src/handlers/serve';
import { openMeterDb } from '../src/store/prisma';
import { readSample } from '../src/store/requests';
import { connectBus, createStream, createTestDb, deviceSends, envelope, inTime, logger, type TestDb } from './support';

let testDb: TestDb;
let bus: Bus;
let js: JetStreamClient;
let stream: Awaited<ReturnType<typeof createStream>>;
let consumer: DurablePullConsumer;
let deps: RequestDeps;
let bridge: BridgeStandIn;
let registry: RegistryStandIn;

beforeAll(async () => {
  testDb = await createTestDb();
  const id = uniqueId('m');
  bus = await connectBus(uniqueId('meter-req-'), `${id}.`);
  stream = await createStream(bus.connection, id);
  js = bus.connection.jetstream();
  bridge = new BridgeStandIn(bus.connection, { prefix: stream.prefix });
  registry = new RegistryStandIn(bus.connection, { prefix: stream.prefix });
  deps = {
    db: testDb.db,
    bridge: new BridgeClient(bus, { timeoutMs: 2000, logger }),
    registry: new RegistryClient(bus, { timeoutMs: 2000, logger }),
    topicRoot: 'meter',
  };
  consumer = new DurablePullConsumer(bus.connection, {
    stream: stream.name,
    durable: uniqueId('meter-req-ingest-'),
    filterSubject: `${stream.prefix}dev.in.meter.>`,
    batch: 20,
    ackWaitS: 30,
    process: deviceInProcessor(testDb.db, stream.prefix, logger),
    logger,
  });
  consumer.start();
});

afterAll(async () => {
  bridge?.close();
  registry?.close();
  await consumer?.stop();
  await stream?.drop();
  await bus?.drain();
  await testDb?.drop();
});

function online(deviceId: string): void {
  registry.connectivity.set(deviceId, { status: 'connected', status_changed_at: '2026-06-01T00:00:00.000Z', last_seen_at: '2026-06-01T00:01:00.000Z' });
}

const refusal = (work: Promise<unknown>): Promise<ApiError> => rejectionOf(work, ApiError);

const withParams = (deviceId: string, params: Record<string, string>, body?: Record<string, unknown>): RequestEnvelope =>
  envelope(deviceId, {}, { params: { device_id: deviceId, ...params }, ...(body ? { body } : {}) });

describe('report', () => {
  it('publishes report> to sys/exe and echoes it', async () => {
    const dev = randomDeviceId();
    const res = await sendReport(deps, envelope(dev));
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ topic: `meter/${dev}/sys/exe`, payload: 'report>', command: 'report', sent_at: expect.any(String) });
    expect(bridge.published.at(-1)).toEqual({ topic: `meter/${dev}/sys/exe`, payload: 'report>', qos: 2, retain: false });
  });

  it('is 503 publish_failed when the broker cannot take it, and 404 on a light', async () => {
    bridge.mode = 'refuse';
    try {
      const err = await refusal(sendReport(deps, envelope(randomDeviceId())));
      expect([err.status, err.code]).toEqual([503, 'publish_failed']);
    } finally {
      bridge.mode = 'ok';
    }
    expect((await refusal(sendReport(deps, envelope(randomDeviceId(), {}, {}, 'light')))).status).toBe(404);
  });
});

describe('live reading', () => {
  it('sends sample>token=..., settles on the live answer, corrected for CT turns', async () => {
    const dev = randomDeviceId();
    online(dev);
    const res = await requestSample(deps, envelope(dev), logger);
    expect(res.status).toBe(202);
    const body = res.body as { token: string; state: string; timeout_s: number; requested_at: string };
    expect(body).toMatchObject({ device_id: dev, state: 'pending', timeout_s: expect.any(Number) });
    expect(body.timeout_s).toBeLessThanOrEqual(30);
    expect(res.headers?.Location).toBe(`/v1/meter/devices/${dev}/sample/${body.token}`);
    expect(bridge.published.at(-1)).toMatchObject({ topic: `meter/${dev}/sys/exe`, payload: `sample>token=${body.token}` });
    expect((await getSample(deps, withParams(dev, { token: body.token }), inTime())).body).toMatchObject({ state: 'pending', reading: null, reason: null });

    await deviceSends(js, stream.prefix, dev, 'live', { token: body.token, link: 'ok', v: 230.2, i: 2.6, p: 580, pf: 0.97, f: 50, ct: 2, age_s: 0.4 });
    const done = await waitFor(async () => {
      const b = (await getSample(deps, withParams(dev, { token: body.token }), inTime())).body as Record<string, unknown>;
      return b.state !== 'pending' ? b : undefined;
    }, { what: 'the live answer' });
    expect(done).toMatchObject({
      state: 'done',
      reason: null,
      reading: { link: 'ok', answered: true, voltage_v: 230.2, current_a: 1.3, power_w: 290, power_factor: 0.97, frequency_hz: 50, ct_turns: 2, age_s: 0.4 },
    });
    // Another device's token is 404.
    expect((await refusal(getSample(deps, withParams(randomDeviceId(), { token: body.token }), inTime()))).status).toBe(404);
  });

  it('allows one request per meter per 10 seconds whoever asks', async () => {
    const dev = randomDeviceId();
    online(dev);
    const outcomes = await Promise.allSettled([requestSample(deps, envelope(dev), logger), requestSample(deps, envelope(dev), logger), requestSample(deps, envelope(dev), logger)]);
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected').map((o) => o.reason as ApiError);
    expect(refused.map((e) => [e.status, e.code])).toEqual([
      [429, 'rate_limited'],
      [429, 'rate_limited'],
    ]);
    for (const e of refused) expect(e.options.retryAfter).toBeGreaterThanOrEqual(9);
  });

  it('is 409 device_offline with the connectivity fields when the meter is not connected; nothing is sent', async () => {
    const dev = randomDeviceId();
    registry.connectivity.set(dev, { status: 'disconnected', status_changed_at: '2026-06-01T00:00:00.000Z', last_seen_at: '2026-05-31T23:59:00.000Z' });
    const before = bridge.published.length;
    const err = await refusal(requestSample(deps, envelope(dev), logger));
    expect([err.status, err.code]).toEqual([409, 'device_offline']);
    expect(err.options.extra).toEqual({ status: 'disconnected', status_changed_at: '2026-06-01T00:00:00.000Z', last_seen_at: '2026-05-31T23:59:00.000Z' });
    expect(bridge.published.length).toBe(before);
  });

  it('is 503 publish_failed when the broker cannot be reached, and the slot is given back', async () => {
    const dev = randomDeviceId();
    online(dev);
    bridge.mode = 'refuse';
    try {
      const err = await refusal(requestSample(deps, envelope(dev), logger));
      expect([err.status, err.code]).toEqual([503, 'publish_failed']);
    } finally {
      bridge.mode = 'ok';
    }
    expect((await requestSample(deps, envelope(dev), logger)).status).toBe(202);
  });

  it('ends failed with the meter’s reason, or no_reply after the timeout', async () => {
    const dev = randomDeviceId();
    online(dev);
    const { token } = (await requestSample(deps, envelope(dev), logger)).body as { token: string };
    await deviceSends(js, stream.prefix, dev, 'live', { token, error: 'busy' });
    await waitFor(async () => ((await getSample(deps, withParams(dev, { token }), inTime())).body as { state: string }).state === 'failed', { what: 'failed' });
    expect((await getSample(deps, withParams(dev, { token }), inTime())).body).toMatchObject({ state: 'failed', reason: 'busy', reading: null });

    // A meter whose firmware does not know the verb answers `unknown` on sys/resp: failed at once, unsupported.
    const old = randomDeviceId();
    online(old);
    const unknown = (await requestSample(deps, envelope(old), logger)).body as { token: string };
    await deviceSends(js, stream.prefix, old, 'sys.resp', `sample>token=${unknown.token}>unknown`);
    await waitFor(async () => ((await getSample(deps, withParams(old, { token: unknown.token }), inTime())).body as { state: string }).state === 'failed', { what: 'failed' });
    expect((await getSample(deps, withParams(old, { token: unknown.token }), inTime())).body).toMatchObject({ state: 'failed', reason: 'unsupported', reading: null });

    const other = randomDeviceId();
    online(other);
    const quiet = (await requestSample(deps, envelope(other), logger)).body as { token: string };
    const later = await readSample(testDb.db, other, quiet.token, inTime(), new Date(Date.now() + 30_000));
    expect(later).toMatchObject({ view: { state: 'no_reply', reason: null }, settled: true });
    // An answer after the outcome was final changes nothing.
    await deviceSends(js, stream.prefix, other, 'live', { token: quiet.token, link: 'ok', v: 230, i: 1, p: 200, pf: 0.9, f: 50, ct: 1, age_s: 0.1 });
    await new Promise((r) => setTimeout(r, 500));
    expect((await getSample(deps, withParams(other, { token: quiet.token }), inTime())).body).toMatchObject({ state: 'no_reply' });
  });
});

describe('energy reset', () => {
  it('needs confirm equal to the device id: mismatched, missing, or no body at all is 409 confirmation_required, nothing sent', async () => {
    // A letter in the id, so that its lower-case form is a different string.
    const dev = `A${randomDeviceId().slice(1)}`;
    const before = bridge.published.length;
    for (const extra of [{ body: { confirm: 'nope' } }, { body: { confirm: dev.toLowerCase() } }, { body: {} }, {}]) {
      const err = await refusal(requestReset(deps, envelope(dev, {}, extra), logger));
      expect([err.status, err.code]).toEqual([409, 'confirmation_required']);
    }
    expect(bridge.published.length).toBe(before);
  });

  it('is pending, then done, duplicate or failed by the acknowledgement; unmatched rejections show while pending', async () => {
    const dev = randomDeviceId();
    const start = async () => {
      const res = await requestReset(deps, envelope(dev, {}, { body: { confirm: dev } }), logger);
      expect(res.status).toBe(202);
      const body = res.body as { token: string; payload: string; topic: string };
      expect(res.headers?.Location).toBe(`/v1/meter/devices/${dev}/resetenergy/${body.token}`);
      expect(body.payload).toBe(`resetenergy>token=${body.token}`);
      expect(body.topic).toBe(`meter/${dev}/sys/exe`);
      return body.token;
    };
    const poll = async (token: string) => (await getReset(deps, withParams(dev, { token }))).body as Record<string, unknown>;
    const settled = (token: string) => waitFor(async () => ((await poll(token)).state !== 'pending' ? poll(token) : undefined), { what: 'settled' });

    const a = await start();
    expect(await poll(a)).toMatchObject({ state: 'pending', result: null, reason: null, at: null, requested_at: expect.any(String), unmatched_rejection: null });
    await deviceSends(js, stream.prefix, dev, 'sys.resp', 'resetenergy>>failed:unreadable token', new Date('2099-01-01T00:00:00Z'));
    await waitFor(async () => (await poll(a)).unmatched_rejection !== null, { what: 'unmatched rejection' });
    expect((await poll(a)).unmatched_rejection).toEqual({ reason: 'unreadable token', at: '2099-01-01T00:00:00.000Z' });
    await deviceSends(js, stream.prefix, dev, 'sys.resp', `resetenergy>token=${a}>ok`);
    expect(await settled(a)).toMatchObject({ state: 'done', result: 'ok', reason: null, at: expect.any(String) });

    const b = await start();
    await deviceSends(js, stream.prefix, dev, 'sys.resp', `resetenergy>token=${b}>duplicate`);
    expect(await settled(b)).toMatchObject({ state: 'duplicate', result: 'duplicate' });

    const c = await start();
    await deviceSends(js, stream.prefix, dev, 'sys.resp', `resetenergy>token=${c}>failed:counter locked`);
    expect(await settled(c)).toMatchObject({ state: 'failed', result: 'failed', reason: 'counter locked' });

    // A meter whose firmware does not know the verb answers `unknown`: it will never reset.
    const d = await start();
    await deviceSends(js, stream.prefix, dev, 'sys.resp', `resetenergy>token=${d}>unknown`);
    expect(await settled(d)).toMatchObject({ state: 'failed', result: 'unknown', reason: 'unsupported' });

    expect((await refusal(getReset(deps, withParams(randomDeviceId(), { token: c })))).status).toBe(404);
  });
});

describe('store outage', () => {
  it('answers 503, not 500, on every subject that needs Postgres while it is stopped; a report still goes out', async () => {
    const proxy = await cuttableDatabase(testDb.url);
    const db = openMeterDb(proxy.url, 2);
    // The meter on a bus of its own (so its subjects reach it, not the one above), its calls to
    // the bridge and registry through the clients above.
    const meterBus = await connectBus(uniqueId('meter-down-'), `${uniqueId('down')}.`);
    serveMeter(meterBus, { ...deps, db });
    await meterBus.connection.flush();
    const dev = randomDeviceId();
    online(dev);
    try {
      expect(await meterBus.request('meter.interval.list', envelope(dev))).toMatchObject({ ok: true });
      proxy.cut();
      const token = (kind: 's' | 'r') => `${kind}_${'a'.repeat(22)}`;
      const needDatabase: Record<Exclude<(typeof METER_SUBJECTS)[number], 'meter.report.send'>, RequestEnvelope> = {
        'meter.interval.list': envelope(dev),
        'meter.summary.get': envelope(dev),
        'meter.energy.get': envelope(dev, { bucket: 'day' }),
        'meter.sample.create': envelope(dev),
        'meter.sample.get': envelope(dev, {}, { params: { token: token('s') } }),
        'meter.reset.create': envelope(dev, {}, { body: { confirm: dev } }),
        'meter.reset.get': envelope(dev, {}, { params: { token: token('r') } }),
      };
      const requests = (Object.keys(needDatabase) as Array<keyof typeof needDatabase>).map((subject) => ({ subject, envelope: needDatabase[subject] }));
      expect(await answersNotUnavailable(meterBus, requests)).toEqual([]);
      expect(await meterBus.request('meter.report.send', envelope(dev))).toMatchObject({ ok: true, status: 202 });
    } finally {
      proxy.restore();
      await db.$disconnect();
      await proxy.close();
      await meterBus.drain();
    }
  });
});
