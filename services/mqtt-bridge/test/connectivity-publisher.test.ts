import type { NatsConnection } from 'nats';
import { createLogger, ensureStream } from '@fleet/service-kit';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { ConnectivityPublisher } from '../src/capture/connectivity-publisher';
import { deviceEventsStream } from '../src/capture/streams';
import { deleteStreams, isolation, natsClient, readStream } from './support';

type Event = { device_id: string; kind: string; at: string };

describe('ConnectivityPublisher on JetStream', () => {
  const names = isolation();
  const logger = createLogger('mqtt-bridge-test', 'silent');
  let nc: NatsConnection;
  let publisher: ConnectivityPublisher;

  beforeAll(async () => {
    nc = await natsClient();
    await ensureStream(await nc.jetstreamManager(), deviceEventsStream(names.deviceEvents, names.prefix), logger);
    // A window far longer than the test: whatever is published before stop() went out at once.
    publisher = new ConnectivityPublisher({ js: nc.jetstream(), subjectPrefix: names.prefix, stream: names.deviceEvents, flushMs: 3_600_000, maxEvents: 1000, logger });
    publisher.start();
  });

  afterAll(async () => {
    await publisher?.stop();
    await deleteStreams(nc, names.deviceEvents);
    await nc.close();
  });

  const published = async (deviceId: string): Promise<Event[]> =>
    (await readStream(nc, names.deviceEvents, `${names.prefix}evt.bridge.connectivity.batch.v1`)).flatMap((m) => m.json<{ events: Event[] }>().events).filter((e) => e.device_id === deviceId);

  it('publishes a device’s first message and its offline at once; further traffic of a present device waits for the window', async () => {
    const id = randomDeviceId();
    const t0 = Date.now();
    publisher.record(id, 'light', t0, false);
    await waitFor(async () => (await published(id)).length === 1, { timeoutMs: 2000, what: 'the first seen, before the window ends' });
    expect(await published(id)).toEqual([{ device_id: id, product: 'light', kind: 'seen', at: new Date(t0).toISOString() }]);

    publisher.record(id, 'light', t0 + 10, false);
    publisher.record(id, 'light', t0 + 20, true);
    // The offline is a change: it goes out now, with the seen that waited beside it.
    await waitFor(async () => (await published(id)).some((e) => e.kind === 'offline'), { timeoutMs: 2000, what: 'the offline' });
    expect((await published(id)).map((e) => [e.kind, e.at])).toEqual([
      ['seen', new Date(t0).toISOString()],
      ['seen', new Date(t0 + 10).toISOString()],
      ['offline', new Date(t0 + 20).toISOString()],
    ]);

    // Back after its offline: a change again.
    publisher.record(id, 'light', t0 + 30, false);
    await waitFor(async () => (await published(id)).length === 4, { timeoutMs: 2000, what: 'the seen after offline' });
  });

  it('sends the further traffic of a present device with the next change, whoever’s it is', async () => {
    const id = randomDeviceId();
    const t0 = Date.now();
    publisher.record(id, 'meter', t0, false);
    await waitFor(async () => (await published(id)).length === 1, { timeoutMs: 2000, what: 'the first seen' });
    publisher.record(id, 'meter', t0 + 5, false);
    // Not a change: it waits, and goes out with the next change (here another device's arrival).
    const other = randomDeviceId();
    publisher.record(other, 'meter', t0 + 6, false);
    await waitFor(async () => (await published(other)).length === 1, { timeoutMs: 2000, what: 'the other device’s first seen' });
    expect((await published(id)).map((e) => e.at)).toEqual([new Date(t0).toISOString(), new Date(t0 + 5).toISOString()]);
  });

  it('publishes at once a present device heard from again after ten minutes of silence (the registry may have disconnected it)', async () => {
    const id = randomDeviceId();
    const t0 = Date.now() - 11 * 60_000;
    publisher.record(id, 'meter', t0, false);
    await waitFor(async () => (await published(id)).length === 1, { timeoutMs: 2000, what: 'the first seen' });
    publisher.record(id, 'meter', t0 + 11 * 60_000, false);
    await waitFor(async () => (await published(id)).length === 2, { timeoutMs: 2000, what: 'the seen after the silence, before the window ends' });
  });
});
