import { Bus, createLogger, ServiceUnavailableError } from '@fleet/service-kit';
import { BridgeStandIn, randomDeviceId, startPrivateNats, uniqueId, type PrivateNats, rejectionOf } from '@fleet/test-kit';
import { BridgeClient, protocolQos } from '../src';
import { BATCH_MAX_MESSAGES } from '../src/publish-batcher';

const logger = createLogger('bridge-client-test', 'silent');
let nats: PrivateNats;
let bus: Bus;
let bridge: BridgeStandIn;
let client: BridgeClient;
/** For the tests about a bridge that does not answer: gives up after 300 ms. */
let impatient: BridgeClient;
const call = () => ({ requestId: uniqueId('req') });

beforeAll(async () => {
  nats = await startPrivateNats();
  bus = await Bus.connect({ servers: nats.url, service: 'bridge-client-test', logger, requestTimeoutMs: 3000 });
  bridge = new BridgeStandIn(bus.connection);
  // Room for a machine busy with the rest of the suite; time-outs are the impatient client's.
  client = new BridgeClient(bus, { timeoutMs: 3000, logger });
  impatient = new BridgeClient(bus, { timeoutMs: 300, logger });
});

afterAll(async () => {
  bridge?.close();
  await bus?.drain();
  await nats?.stop();
});

beforeEach(() => bridge.reset());

const failure = (work: Promise<unknown>): Promise<ServiceUnavailableError> => rejectionOf(work, ServiceUnavailableError);

describe('BridgeClient', () => {
  it('publishes with the QoS the device protocol gives the topic, never retained unless asked', async () => {
    const id = randomDeviceId();
    const sent = await client.publish(call(), { topic: `meter/${id}/sys/exe`, payload: 'report>' });
    await client.publish(call(), { topic: `light/${id}/cmd/light1`, payload: 'solid:FF0000' });
    await client.publish(call(), { topic: `light/${id}/custom`, payload: 'x', qos: 0, retain: true });
    expect(bridge.published).toEqual([
      { topic: `meter/${id}/sys/exe`, payload: 'report>', qos: 2, retain: false },
      { topic: `light/${id}/cmd/light1`, payload: 'solid:FF0000', qos: 1, retain: false },
      { topic: `light/${id}/custom`, payload: 'x', qos: 0, retain: true },
    ]);
    expect(sent).toMatchObject({ topic: `meter/${id}/sys/exe`, payload: 'report>' });
    expect(Number.isNaN(Date.parse(sent.sent_at))).toBe(false);
    expect([protocolQos('a/b/sys/exe'), protocolQos('a/b/cmd/sound'), protocolQos('a/b/sys/resp')]).toEqual([2, 1, undefined]);
  });

  it('sets and removes credentials with bodies the bridge accepts', async () => {
    const id = randomDeviceId();
    await client.setCredential(call(), { device_id: id, product: 'light', password: '0123456789abcdef0123456789abcdef' });
    await client.removeCredential(call(), id);
    expect(bridge.upserts).toEqual([{ device_id: id, product: 'light', password: '0123456789abcdef0123456789abcdef' }]);
    expect(bridge.deletes).toEqual([{ device_id: id }]);
    expect(bridge.malformed).toEqual([]);
  });

  it('answers every failure with one 503 per kind: broker_unavailable for credentials, publish_failed for messages', async () => {
    const id = randomDeviceId();
    for (const mode of ['refuse', 'silent'] as const) {
      bridge.mode = mode;
      expect((await failure(impatient.publish(call(), { topic: `light/${id}/cmd/light1`, payload: 'x' }))).code).toBe('publish_failed');
      expect((await failure(impatient.removeCredential(call(), id))).code).toBe('broker_unavailable');
    }
    bridge.mode = 'ok';
    // A deadline already passed: nothing is sent at all.
    expect((await failure(client.publish({ requestId: 'late', deadline: Date.now() - 1 }, { topic: `light/${id}/cmd/light1`, payload: 'x' }))).code).toBe('publish_failed');
    expect(bridge.published).toEqual([]);
  });

  it('refuses to send a body its schema refuses', async () => {
    await expect(client.publish(call(), { topic: 'light/+/cmd/light1', payload: 'x' })).rejects.toThrow(/contract/);
    await expect(client.setCredential(call(), { device_id: 'nope', product: 'light', password: 'short' })).rejects.toThrow(/contract/);
    expect(bridge.published).toEqual([]);
    expect(bridge.upserts).toEqual([]);
  });

  it('sends the messages of one event-loop turn as one batch request, each caller with its own outcome', async () => {
    const id = randomDeviceId();
    const topics = Array.from({ length: 5 }, (_, k) => `light/${id}/cmd/light${(k % 3) + 1}`);
    bridge.refusedTopics.add(`light/${id}/custom`);
    const outcomes = await Promise.allSettled([
      ...topics.map((topic, k) => client.publish(call(), { topic, payload: `solid:00000${k}` })),
      client.publish(call(), { topic: `light/${id}/custom`, payload: 'x' }),
    ]);
    expect(bridge.batches).toEqual([6]);
    expect(outcomes.slice(0, 5).map((o) => (o.status === 'fulfilled' ? o.value.payload : o.reason))).toEqual(topics.map((_, k) => `solid:00000${k}`));
    const refused = outcomes[5] as PromiseRejectedResult;
    expect(refused.reason).toBeInstanceOf(ServiceUnavailableError);
    expect(refused.reason.code).toBe('publish_failed');
    expect(bridge.published.map((m) => m.topic)).toEqual(topics);
    // A lone message in its turn goes as bridge.message.publish: no batch.
    await client.publish(call(), { topic: topics[0] as string, payload: 'off' });
    expect(bridge.batches).toEqual([6]);
    expect(bridge.published).toHaveLength(6);
  });

  it(`splits a turn's messages into batches of at most ${BATCH_MAX_MESSAGES}`, async () => {
    expect(Number.isInteger(BATCH_MAX_MESSAGES) && BATCH_MAX_MESSAGES > 1).toBe(true);
    const id = randomDeviceId();
    const sent = await Promise.all(Array.from({ length: BATCH_MAX_MESSAGES + 3 }, (_, k) => client.publish(call(), { topic: `light/${id}/cmd/sound`, payload: `n${k}` })));
    expect(bridge.batches).toEqual([BATCH_MAX_MESSAGES, 3]);
    expect(sent.map((s) => s.payload)).toEqual(bridge.published.map((m) => m.payload));
  });

  it('fails every message of a batch the bridge did not answer, and a message already late alone', async () => {
    const id = randomDeviceId();
    bridge.mode = 'silent';
    const started = Date.now();
    const failures = await Promise.all([1, 2, 3].map((k) => failure(impatient.publish(call(), { topic: `light/${id}/cmd/light${k}`, payload: 'x' }))));
    expect(failures.map((f) => f.code)).toEqual(['publish_failed', 'publish_failed', 'publish_failed']);
    expect(Date.now() - started).toBeLessThan(1500);
    bridge.mode = 'ok';
    const [late, onTime] = await Promise.allSettled([
      client.publish({ requestId: 'late', deadline: Date.now() - 1 }, { topic: `light/${id}/cmd/light1`, payload: 'late' }),
      client.publish(call(), { topic: `light/${id}/cmd/light2`, payload: 'on time' }),
    ]);
    expect((late as PromiseRejectedResult).reason.code).toBe('publish_failed');
    expect(onTime.status).toBe('fulfilled');
    expect(bridge.published.map((m) => m.payload)).toEqual(['on time']);
  });

  it('sends message by message to a bridge that does not serve batches', async () => {
    const older = new BridgeStandIn(bus.connection, { prefix: 'older.', serveBatch: false });
    const prefixedBus = await Bus.connect({ servers: nats.url, service: 'bridge-client-older', logger, requestTimeoutMs: 3000, subjectPrefix: 'older.' });
    try {
      const olderClient = new BridgeClient(prefixedBus, { timeoutMs: 3000, logger });
      const id = randomDeviceId();
      const sent = await Promise.all([1, 2, 3].map((k) => olderClient.publish(call(), { topic: `light/${id}/cmd/light${k}`, payload: `p${k}` })));
      expect(sent.map((s) => s.payload)).toEqual(['p1', 'p2', 'p3']);
      expect(older.published.map((m) => m.payload)).toEqual(['p1', 'p2', 'p3']);
      // Remembered for a while: the next turn's messages go one by one without trying a batch.
      await Promise.all([4, 5].map((k) => olderClient.publish(call(), { topic: `light/${id}/cmd/light${k - 3}`, payload: `p${k}` })));
      expect(older.published).toHaveLength(5);
    } finally {
      older.close();
      await prefixedBus.drain();
    }
  });
});
