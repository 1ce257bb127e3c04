import { ApiError, Bus, createLogger } from '@fleet/service-kit';
import { LightStandIn, randomDeviceId, rejectionOf, startPrivateNats, uniqueId, type PrivateNats } from '@fleet/test-kit';
import { LightClient } from '../src';

const logger = createLogger('light-client-test', 'silent');
let nats: PrivateNats;
let bus: Bus;
let lights: LightStandIn;
let client: LightClient;
const call = () => ({ requestId: uniqueId('auto') });

beforeAll(async () => {
  nats = await startPrivateNats();
  bus = await Bus.connect({ servers: nats.url, service: 'light-client-test', logger, requestTimeoutMs: 3000 });
  lights = new LightStandIn(bus.connection);
  client = new LightClient(bus, { timeoutMs: 300, logger });
});

afterAll(async () => {
  lights?.close();
  await bus?.drain();
  await nats?.stop();
});

beforeEach(() => lights.reset());

describe('LightClient', () => {
  it('writes a payload to a light and answers what the broker took', async () => {
    const id = randomDeviceId();
    const written = await client.writeAutomation(call(), id, 'solid:00FF00');
    expect(written).toMatchObject({ device_id: id, channel: 'light1', payload: 'solid:00FF00' });
    expect(lights.writesTo(id)).toEqual(['solid:00FF00']);
  });

  it('is 503 publish_failed when light-command or the broker does not take it, and when nobody answers', async () => {
    lights.mode = 'refuse';
    expect(await rejectionOf(client.writeAutomation(call(), randomDeviceId(), 'solid:00FF00'), ApiError)).toMatchObject({ status: 503, code: 'publish_failed' });
    lights.mode = 'silent';
    expect(await rejectionOf(client.writeAutomation(call(), randomDeviceId(), 'solid:00FF00'), ApiError)).toMatchObject({ status: 503, code: 'publish_failed' });
  });

  it('refuses a body the schema refuses before sending it', async () => {
    await expect(client.writeAutomation(call(), 'not-a-device', 'solid:00FF00')).rejects.toThrow();
    expect(lights.writes).toEqual([]);
  });
});
