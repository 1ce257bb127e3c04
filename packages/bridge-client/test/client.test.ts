import { Bus, createLogger, ServiceUnavailableError } from '@fleet/service-kit';
import { BridgeStandIn, randomDeviceId, startPrivateNats, uniqueId, type PrivateNats, rejectionOf } from '@fleet/test-kit';
import { BridgeClient, protocolQos } from '../src';

const logger = createLogger('bridge-client-test', 'silent');
let nats: PrivateNats;
let bus: Bus;
let bridge: BridgeStandIn;
let client: BridgeClient;
const call = () => ({ requestId: uniqueId('req') });

beforeAll(async () => {
  nats = await startPrivateNats();
  bus = await Bus.connect({ servers: nats.url, service: 'bridge-client-test', logger, requestTimeoutMs: 3000 });
  bridge = new BridgeStandIn(bus.connection);
  client = new BridgeClient(bus, { timeoutMs: 300, logger });
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
      expect((await failure(client.publish(call(), { topic: `light/${id}/cmd/light1`, payload: 'x' }))).code).toBe('publish_failed');
      expect((await failure(client.removeCredential(call(), id))).code).toBe('broker_unavailable');
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
});
