import { randomBytes } from 'node:crypto';
import type { NatsConnection } from 'nats';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { ask, bridgeEnv, connectDevice, deleteStreams, isolation, natsClient, runBridge, startBroker, type DynsecBroker, type RunningBridge } from './support';

describe('mqtt-bridge when the broker is away', () => {
  const names = isolation();
  let broker: DynsecBroker;
  let bridge: RunningBridge;
  let nc: NatsConnection;

  beforeAll(async () => {
    nc = await natsClient();
    broker = await startBroker();
    bridge = await runBridge(bridgeEnv(broker, names, { MQTT_PUBLISH_TIMEOUT_MS: '5000', DYNSEC_TIMEOUT_MS: '2000' }));
  });

  afterAll(async () => {
    try {
      process.kill(broker.pid, 'SIGCONT');
    } catch {
      // already gone
    }
    await bridge?.close();
    if (nc) {
      await deleteStreams(nc, names.deviceIn, names.deviceEvents);
      await nc.close();
    }
    await broker?.stop();
  });

  const publish = (body: Record<string, unknown>) => ask(bridge.runtime, `${names.prefix}bridge.message.publish`, body, 15_000);

  it('answers 503 publish_failed within the timeout when the broker hangs, and 503 broker_unavailable for credentials', async () => {
    const id = randomDeviceId();
    const pw = randomBytes(16).toString('hex');
    expect((await ask(bridge.runtime, `${names.prefix}bridge.credential.upsert`, { device_id: id, product: 'light', password: pw })).ok).toBe(true);
    const device = await connectDevice(broker.url, 'light', id, pw);
    device.end(true);
    expect((await publish({ topic: `light/${id}/cmd/light1`, payload: 'solid:FF0000', qos: 1, retain: false })).ok).toBe(true);

    // The broker stops answering (socket open, nothing processed).
    process.kill(broker.pid, 'SIGSTOP');
    const started = Date.now();
    const reply = await publish({ topic: `light/${id}/cmd/light1`, payload: 'off', qos: 1, retain: false });
    const elapsed = Date.now() - started;
    expect(reply).toMatchObject({ ok: false, error: { status: 503, code: 'publish_failed', message: 'The broker could not take the message.' } });
    expect(elapsed).toBeGreaterThanOrEqual(4500);
    expect(elapsed).toBeLessThan(7000);
    const cred = await ask(bridge.runtime, `${names.prefix}bridge.credential.delete`, { device_id: id });
    expect(cred).toMatchObject({ ok: false, error: { status: 503, code: 'broker_unavailable' } });
    process.kill(broker.pid, 'SIGCONT');
  }, 30_000);

  it('answers 503 publish_failed at once when the broker is down, and becomes not ready', async () => {
    const readyz = `http://127.0.0.1:${bridge.runtime.healthPort}/readyz`;
    await waitFor(async () => (await fetch(readyz)).status === 200, { what: 'ready again after SIGCONT' });
    await broker.stop();
    await waitFor(() => !bridge.bridge.isConnected(), { what: 'bridge to notice' });
    const started = Date.now();
    const reply = await publish({ topic: `meter/${randomDeviceId()}/sys/exe`, payload: 'query>', qos: 2, retain: false });
    expect(reply).toMatchObject({ ok: false, error: { status: 503, code: 'publish_failed' } });
    expect(Date.now() - started).toBeLessThan(1000);
    const res = await fetch(readyz);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ checks: { bus: true, mqtt: false } });
  });
});
