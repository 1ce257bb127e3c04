import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { JSONCodec, type NatsConnection } from 'nats';
import { freePort } from '@fleet/launcher';
import { randomDeviceId, uniqueId, waitFor } from '@fleet/test-kit';
import { bridgeEnv, connectDevice, deleteStreams, isolation, natsClient, readStream, startBroker, type DynsecBroker } from './support';

const MAIN = path.resolve(__dirname, '../dist/main.js');
const codec = JSONCodec<Record<string, unknown>>();

describe('mqtt-bridge as a process (dist/main.js)', () => {
  const names = isolation();
  let broker: DynsecBroker;
  let nc: NatsConnection;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    broker = await startBroker();
    nc = await natsClient();
  });

  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    if (nc) {
      await deleteStreams(nc, names.deviceIn, names.deviceEvents);
      await nc.close();
    }
    await broker?.stop();
  });

  it('becomes ready, serves requests, captures traffic, and flushes presence on SIGTERM', async () => {
    const healthPort = await freePort();
    // A long flush interval: the only connectivity batch is the one written during shutdown.
    const env = { ...process.env, ...bridgeEnv(broker, names, { HEALTH_PORT: String(healthPort), CONNECTIVITY_FLUSH_MS: '600000', LOG_LEVEL: 'info' }) };
    const output: string[] = [];
    child = spawn(process.execPath, [MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', (d: Buffer) => output.push(d.toString()));
    child.stderr?.on('data', (d: Buffer) => output.push(d.toString()));
    await waitFor(async () => (await fetch(`http://127.0.0.1:${healthPort}/readyz`)).status === 200, { timeoutMs: 15_000, what: `readiness; output: ${output.join('')}` });

    const id = randomDeviceId();
    const pw = randomBytes(16).toString('hex');
    const reply = await nc.request(`${names.prefix}bridge.credential.upsert`, codec.encode({ request_id: uniqueId('req'), params: {}, query: {}, body: { device_id: id, product: 'meter', password: pw } }), { timeout: 10_000 });
    expect(codec.decode(reply.data)).toEqual({ ok: true, status: 200, body: {} });

    const device = await connectDevice(broker.url, 'meter', id, pw);
    await device.publishAsync(`meter/${id}/status`, 'online', { qos: 1, retain: true });
    await waitFor(async () => (await readStream(nc, names.deviceIn, `${names.prefix}dev.in.meter.${id}.status`)).length === 1, { what: 'capture' });
    // Forced end: the socket closes without DISCONNECT, so the broker publishes the will.
    device.end(true);
    await waitFor(async () => (await readStream(nc, names.deviceIn, `${names.prefix}dev.in.meter.${id}.status`)).length === 2, { what: 'will capture' });

    const exited = new Promise<number | null>((resolve) => child?.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const events = (await readStream(nc, names.deviceEvents, `${names.prefix}evt.bridge.connectivity.batch.v1`)).flatMap((m) => m.json<{ events: { device_id: string; kind: string }[] }>().events);
    expect(events.filter((e) => e.device_id === id).map((e) => e.kind)).toEqual(['seen', 'offline']);
    // No secret in the logs.
    expect(output.join('')).not.toContain(broker.adminPassword);
  });
});
