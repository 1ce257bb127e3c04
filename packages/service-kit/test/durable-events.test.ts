import { connect, JSONCodec, type NatsConnection } from 'nats';
import { createLogger, durableEvents, ensureStream, eventStreamPlan, publishDurable } from '@fleet/service-kit';
import { startPrivateNats, waitFor, type PrivateNats } from '@fleet/test-kit';
import type { DeviceChangedEvent } from '@fleet/contracts';

let nats: PrivateNats;
let nc: NatsConnection;
const logger = createLogger('test', 'silent');
const event = (device_id: string, change: DeviceChangedEvent['change']): DeviceChangedEvent => ({ device_id, change, at: new Date().toISOString() });

beforeAll(async () => {
  nats = await startPrivateNats();
  nc = await connect({ servers: nats.url });
});

afterAll(async () => {
  await nc.close();
  await nats.stop();
});

describe('durable events', () => {
  it('plans a stream with every subject proto-schemas keeps in it', () => {
    expect(eventStreamPlan('REGISTRY_EVENTS').subjects.sort()).toEqual(['evt.registry.device.changed.v1', 'evt.registry.org.changed.v1']);
    expect(eventStreamPlan('REGISTRY_EVENTS', 't1.').subjects.sort()).toEqual(['t1.evt.registry.device.changed.v1', 't1.evt.registry.org.changed.v1']);
    expect(() => eventStreamPlan('NO_SUCH_STREAM')).toThrow(/NO_SUCH_STREAM/);
  });

  it('refuses to publish an event that does not match its schema, and fails while its stream is missing', async () => {
    await expect(publishDurable(nc, 'evt.registry.device.changed.v1', { device_id: 'nope' } as unknown as DeviceChangedEvent)).rejects.toThrow();
    await expect(publishDurable(nc, 'evt.registry.device.changed.v1', event('0123456789AB', 'removed'), { timeoutMs: 500 })).rejects.toThrow();
  });

  it('delivers what was published while no consumer read, in order, once each, dropping what does not match the schema', async () => {
    await ensureStream(await nc.jetstreamManager(), eventStreamPlan('REGISTRY_EVENTS'), logger);
    await publishDurable(nc, 'evt.registry.device.changed.v1', event('0123456789AB', 'moved'), { id: 'e1' });
    await publishDurable(nc, 'evt.registry.device.changed.v1', event('0123456789AB', 'moved'), { id: 'e1' }); // a retried publish: kept once
    nc.publish('evt.registry.device.changed.v1', JSONCodec().encode({ device_id: 'bad' })); // stored by the stream, refused by the reader
    await publishDurable(nc, 'evt.registry.device.changed.v1', event('0123456789AB', 'removed'), { id: 'e2' });
    const seen: string[] = [];
    let failOnce = true;
    const reader = durableEvents(nc, {
      subject: 'evt.registry.device.changed.v1',
      durable: 'reader',
      logger,
      handle: async (e) => {
        if (e.change === 'removed' && failOnce) {
          failOnce = false;
          throw new Error('store down for a moment');
        }
        seen.push(e.change);
      },
    });
    reader.start();
    try {
      await waitFor(() => seen.length === 2, { timeoutMs: 10_000, what: 'both events' });
      expect(seen).toEqual(['moved', 'removed']);
      await reader.stop();
      // Started again, it goes on from where it was: nothing is handled twice.
      await publishDurable(nc, 'evt.registry.device.changed.v1', event('0123456789AB', 'provisioned'), { id: 'e3' });
      reader.start();
      await waitFor(() => seen.length === 3, { timeoutMs: 10_000, what: 'the third event' });
      expect(seen).toEqual(['moved', 'removed', 'provisioned']);
    } finally {
      await reader.stop();
    }
  });
});
