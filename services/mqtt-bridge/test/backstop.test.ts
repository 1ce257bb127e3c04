import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { MqttClient } from 'mqtt';
import type { NatsConnection } from 'nats';
import { startDynsecBroker } from '@fleet/launcher';
import { randomDeviceId, uniqueId, waitFor } from '@fleet/test-kit';
import { ask, bridgeEnv, connectDevice, deleteStreams, isolation, natsClient, readStream, runBridge, type DynsecBroker, type RunningBridge } from './support';


/**
 * Nothing the broker acknowledged is lost while the share group is empty: after a broker
 * restart (Mosquitto does not keep shared subscriptions) and while no replica is connected.
 */
describe('mqtt-bridge backstop session', () => {
  const names = isolation();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bridge-backstop-'));
  const adminPassword = uniqueId('pw');
  let broker: DynsecBroker;
  let nc: NatsConnection;
  let bridges: RunningBridge[] = [];
  let env: Record<string, string>;
  const deviceId = randomDeviceId();
  const password = randomBytes(16).toString('hex');
  let device: MqttClient | undefined;
  let sent = 0;

  const startBroker = (port?: number) => startDynsecBroker({ port, dataDir, adminUsername: 'fleet-admin', adminPassword });
  const restartBroker = async () => {
    await broker.stop();
    broker = await startBroker(broker.port);
  };
  const connect = async () => {
    device?.end(true);
    device = await connectDevice(broker.url, 'meter', deviceId, password);
  };
  /** Publishes n QoS 1 messages, each acknowledged by the broker before the next. */
  const publish = async (n: number) => {
    for (let i = 0; i < n; i += 1) {
      sent += 1;
      await (device as MqttClient).publishAsync(`meter/${deviceId}/tele/seq`, String(sent), { qos: 1 });
    }
  };
  /** Every number sent so far is in DEVICE_IN (at least once). */
  const allStored = async () => {
    const stored = new Set((await readStream(nc, names.deviceIn, `${names.prefix}dev.in.meter.${deviceId}.tele.seq`)).map((m) => Number(m.string())));
    for (let i = 1; i <= sent; i += 1) if (!stored.has(i)) return false;
    return true;
  };

  beforeAll(async () => {
    nc = await natsClient();
    broker = await startBroker();
    env = bridgeEnv(broker, names, { MQTT_BACKSTOP_CHECK_MS: '300' });
    bridges.push(await runBridge(env));
    const upsert = await ask((bridges[0] as RunningBridge).runtime, `${names.prefix}bridge.credential.upsert`, { device_id: deviceId, product: 'meter', password });
    expect(upsert.ok).toBe(true);
    await connect();
  });

  afterAll(async () => {
    device?.end(true);
    for (const b of bridges) await b.close();
    await deleteStreams(nc, names.deviceIn, names.deviceEvents);
    await nc.close();
    await broker.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('one replica holds the backstop and stands it by once the share group is confirmed', async () => {
    const [a] = bridges as [RunningBridge];
    await waitFor(() => a.bridge.holdsBackstop(), { what: 'backstop held' });
    await publish(20);
    await waitFor(allStored, { what: 'captures' });
    // Confirmed: steady traffic goes through the share group only, never twice.
    const stored = await readStream(nc, names.deviceIn, `${names.prefix}dev.in.meter.${deviceId}.tele.seq`);
    expect(stored.length).toBe(20);
  });

  it('keeps what devices sent while no replica was connected', async () => {
    await (bridges[0] as RunningBridge).close();
    bridges = [];
    await publish(30);
    bridges.push(await runBridge(env));
    await waitFor(allStored, { what: 'messages sent while the bridge was away', timeoutMs: 15_000 });
  });

  it('keeps what devices sent after a broker restart, before any replica subscribed again', async () => {
    // No replica connected across the restart: the gap lasts until the bridge starts again.
    await (bridges[0] as RunningBridge).close();
    bridges = [];
    await restartBroker();
    await connect();
    await publish(30);
    bridges.push(await runBridge(env));
    await waitFor(allStored, { what: 'messages of the gap', timeoutMs: 15_000 });
  });

  it('keeps what devices sent right after a broker restart while replicas run', async () => {
    bridges.push(await runBridge({ ...env, SERVICE_INSTANCE: uniqueId('r') }));
    await restartBroker();
    await connect();
    await publish(50);
    await waitFor(allStored, { what: 'messages after the restart', timeoutMs: 15_000 });
    // Exactly one replica holds the backstop, and every replica is ready again (all its connections).
    await waitFor(() => bridges.filter((b) => b.bridge.holdsBackstop()).length === 1, { what: 'one holder' });
    await waitFor(() => bridges.every((b) => b.bridge.isConnected()), { what: 'replicas ready after the restart' });
  });

  it('another replica takes the backstop over when its holder stops', async () => {
    const holder = bridges.find((b) => b.bridge.holdsBackstop()) as RunningBridge;
    const other = bridges.find((b) => b !== holder) as RunningBridge;
    await holder.close();
    bridges = [other];
    await waitFor(() => other.bridge.holdsBackstop(), { what: 'takeover', timeoutMs: 5000 });
    await restartBroker();
    await connect();
    await publish(20);
    await waitFor(allStored, { what: 'messages after the takeover and restart', timeoutMs: 15_000 });
  });
});
