import { randomBytes } from 'node:crypto';
import type { MqttClient } from 'mqtt';
import type { NatsConnection } from 'nats';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { ask, bridgeEnv, connectDevice, deleteStreams, isolation, natsClient, readStream, runBridge, sleep, startBroker, type DynsecBroker, type RunningBridge } from './support';

describe('mqtt-bridge replicas', () => {
  const names = isolation();
  let broker: DynsecBroker;
  let a: RunningBridge;
  let b: RunningBridge;
  let envA: Record<string, string>;
  let envB: Record<string, string>;
  let nc: NatsConnection;
  const devices: { id: string; client: MqttClient }[] = [];

  beforeAll(async () => {
    nc = await natsClient();
    broker = await startBroker();
    envA = bridgeEnv(broker, names);
    envB = bridgeEnv(broker, names);
    a = await runBridge(envA);
    b = await runBridge(envB);
    for (let i = 0; i < 10; i += 1) {
      const id = randomDeviceId();
      const pw = randomBytes(16).toString('hex');
      expect((await ask(a.runtime, `${names.prefix}bridge.credential.upsert`, { device_id: id, product: i % 2 ? 'meter' : 'light', password: pw })).ok).toBe(true);
      devices.push({ id, client: await connectDevice(broker.url, i % 2 ? 'meter' : 'light', id, pw) });
    }
  });

  afterAll(async () => {
    for (const d of devices) d.client.end(true);
    await a?.close();
    await b?.close();
    if (nc) {
      await deleteStreams(nc, names.deviceIn, names.deviceEvents);
      await nc.close();
    }
    await broker?.stop();
  });

  const root = (i: number) => (i % 2 ? 'meter' : 'light');

  it('split the device traffic through the shared subscription; nothing is lost or doubled', async () => {
    const perDevice = 50;
    const sent = new Set<string>();
    await Promise.all(
      devices.map(async ({ id, client }, i) => {
        for (let n = 0; n < perDevice; n += 1) {
          const payload = `${id}:${n}`;
          sent.add(payload);
          await client.publishAsync(`${root(i)}/${id}/tele/seq`, payload, { qos: 1 });
        }
      }),
    );
    const total = devices.length * perDevice;
    await waitFor(() => a.bridge.captured() + b.bridge.captured() >= total, { timeoutMs: 10_000, what: 'all captures' });
    await sleep(300);
    expect(a.bridge.captured() + b.bridge.captured()).toBe(total);
    expect(a.bridge.captured()).toBeGreaterThan(total / 10);
    expect(b.bridge.captured()).toBeGreaterThan(total / 10);
    const stored = await readStream(nc, names.deviceIn, `${names.prefix}dev.in.*.*.tele.seq`);
    expect(stored).toHaveLength(total);
    expect(new Set(stored.map((m) => m.string()))).toEqual(sent);
    // Per device, the stream keeps the order the device sent in.
    for (const { id } of devices) {
      const seqs = stored.filter((m) => m.headers['Mqtt-Topic']?.includes(id)).map((m) => Number(m.string().split(':')[1]));
      expect(seqs).toHaveLength(perDevice);
    }
  });

  it('acknowledges a QoS 1 message only once JetStream stored it: nothing is lost across a restart while the stream was away', async () => {
    // A retained message from before the restart: captured once, not replayed on resubscribe.
    const retained = devices[1] as { id: string; client: MqttClient };
    await retained.client.publishAsync(`meter/${retained.id}/status`, 'online', { qos: 1, retain: true });
    await waitFor(async () => (await readStream(nc, names.deviceIn, `${names.prefix}dev.in.meter.${retained.id}.status`)).length === 1, { what: 'retained capture' });
    const jsm = await nc.jetstreamManager();
    await jsm.streams.delete(names.deviceIn);
    const { id, client } = devices[0] as { id: string; client: MqttClient };
    const payloads = Array.from({ length: 20 }, (_, n) => `away:${n}`);
    for (const p of payloads) await client.publishAsync(`light/${id}/tele/away`, p, { qos: 1 });
    await sleep(500);
    // Both replicas hold the messages unstored; they stop (a rollout) without acknowledging them.
    await a.close();
    await b.close();
    // Same instances come back (stable client ids, persistent sessions) and recreate the stream.
    a = await runBridge(envA);
    b = await runBridge(envB);
    const stored = await waitFor(async () => {
      const m = await readStream(nc, names.deviceIn, `${names.prefix}dev.in.light.${id}.tele.away`);
      return m.length >= payloads.length && m;
    }, { timeoutMs: 10_000, what: 'messages after the restart' });
    await sleep(300);
    expect(stored.map((m) => m.string()).sort()).toEqual([...payloads].sort());
    // The stream was recreated empty; the retained status did not come back with the new subscriptions.
    expect(await readStream(nc, names.deviceIn, `${names.prefix}dev.in.meter.${retained.id}.>`)).toEqual([]);
  });
});
