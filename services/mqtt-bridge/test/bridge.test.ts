import { randomBytes } from 'node:crypto';
import type { MqttClient } from 'mqtt';
import type { NatsConnection } from 'nats';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import {
  ask,
  bridgeEnv,
  connectDevice,
  deleteStreams,
  isolation,
  mqttConnect,
  natsClient,
  readStream,
  runBridge,
  sleep,
  startBroker,
  type DynsecBroker,
  type RunningBridge,
} from './support';

const password = () => randomBytes(16).toString('hex');

describe('mqtt-bridge against a dynamic-security broker, NATS and JetStream', () => {
  const names = isolation();
  let broker: DynsecBroker;
  let bridge: RunningBridge;
  let nc: NatsConnection;
  const clients: MqttClient[] = [];
  const track = (c: MqttClient) => {
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    nc = await natsClient();
    broker = await startBroker();
    bridge = await runBridge(bridgeEnv(broker, names));
  });

  afterAll(async () => {
    for (const c of clients) c.end(true);
    await bridge?.close();
    if (nc) {
      await deleteStreams(nc, names.deviceIn, names.deviceEvents);
      await nc.close();
    }
    await broker?.stop();
  });

  const upsert = (device_id: string, product: 'light' | 'meter', pw: string) => ask(bridge.runtime, `${names.prefix}bridge.credential.upsert`, { device_id, product, password: pw });
  const remove = (device_id: string) => ask(bridge.runtime, `${names.prefix}bridge.credential.delete`, { device_id });
  const publish = (body: Record<string, unknown>) => ask(bridge.runtime, `${names.prefix}bridge.message.publish`, body);
  const publishBatch = (messages: Array<Record<string, unknown>>) => ask(bridge.runtime, `${names.prefix}bridge.message.publish.batch`, { messages });
  const admin = () => mqttConnect(broker.url, { username: broker.adminUsername, password: broker.adminPassword, protocolVersion: 5 }).then(track);

  it('creates a credential the device can connect with, and refuses a wrong password', async () => {
    const id = randomDeviceId();
    const pw = password();
    await expect(connectDevice(broker.url, 'light', id, pw)).rejects.toThrow();
    expect(await upsert(id, 'light', pw)).toEqual({ ok: true, status: 200, body: {} });
    const device = track(await connectDevice(broker.url, 'light', id, pw));
    expect(device.connected).toBe(true);
    await expect(connectDevice(broker.url, 'light', id, password(), { clientId: `${id}` })).rejects.toThrow(/Not authorized|Bad username or password/i);
    // Client id must be the device id.
    await expect(connectDevice(broker.url, 'light', id, pw, { clientId: 'other-client' })).rejects.toThrow();
    // Upsert again replaces the password.
    const pw2 = password();
    expect((await upsert(id, 'light', pw2)).ok).toBe(true);
    device.end(true);
    await expect(connectDevice(broker.url, 'light', id, pw)).rejects.toThrow();
    track(await connectDevice(broker.url, 'light', id, pw2));
  });

  it('moves a device to another topic root when its product changes', async () => {
    const id = randomDeviceId();
    const pw = password();
    await upsert(id, 'light', pw);
    expect((await upsert(id, 'meter', pw)).ok).toBe(true);
    const device = track(await connectDevice(broker.url, 'meter', id, pw, { protocolVersion: 5 }));
    await expect(device.subscribeAsync(`light/${id}/#`, { qos: 1 })).rejects.toThrow(/Not authorized/);
    expect((await device.subscribeAsync(`meter/${id}/#`, { qos: 1 }))[0]?.qos).toBe(1);
  });

  it('rejects invalid bodies with 400', async () => {
    const reply = await upsert('nothex', 'light', password());
    expect(reply.ok).toBe(false);
    expect(reply).toMatchObject({ ok: false, error: { status: 400, code: 'validation_error' } });
    const bad = await publish({ topic: 'light/+/x', payload: 'x', qos: 1, retain: false });
    expect(bad).toMatchObject({ ok: false, error: { status: 400 } });
  });

  it('refuses a topic the broker would drop the connection for, and keeps publishing', async () => {
    const id = randomDeviceId();
    const refused = await publish({ topic: `light/${id}/\u0085`, payload: 'x', qos: 1, retain: false });
    expect(refused).toMatchObject({ ok: false, error: { status: 400, code: 'validation_error', message: "'topic' may not contain the control character U+0085" } });
    expect(await publish({ topic: `light/${id}/cmd/light1`, payload: 'off', qos: 1, retain: false })).toMatchObject({ ok: true });
  });

  it('keeps a device to its own subtree: publishing and subscribing elsewhere are refused', async () => {
    const id = randomDeviceId();
    const other = randomDeviceId();
    const pw = password();
    await upsert(id, 'meter', pw);
    const monitor = await admin();
    const seen: string[] = [];
    await monitor.subscribeAsync('#', { qos: 1 });
    monitor.on('message', (topic) => seen.push(topic));
    const device = track(await connectDevice(broker.url, 'meter', id, pw, { protocolVersion: 5 }));

    for (const filter of [`meter/${other}/#`, 'meter/#', `light/${id}/#`, '#', `$share/g/meter/${id}/#`]) {
      await expect(device.subscribeAsync(filter, { qos: 1 })).rejects.toThrow(/Not authorized/);
    }
    const ownSub = await device.subscribeAsync(`meter/${id}/#`, { qos: 1 });
    expect(ownSub[0]?.qos).toBe(1);

    for (const topic of [`meter/${other}/iv`, `light/${id}/status`, 'elsewhere']) {
      await device.publishAsync(topic, 'sneaky', { qos: 1 }).catch(() => undefined);
    }
    await device.publishAsync(`meter/${id}/marker`, 'mine', { qos: 1 });
    await waitFor(() => seen.includes(`meter/${id}/marker`), { what: 'the marker' });
    await sleep(200);
    expect(seen.filter((t) => t !== `meter/${id}/marker` && (t.includes(id) || t.includes(other) || t === 'elsewhere'))).toEqual([]);
  });

  it('deleting a credential disconnects the device, which cannot reconnect', async () => {
    const id = randomDeviceId();
    const pw = password();
    await upsert(id, 'light', pw);
    const device = track(await connectDevice(broker.url, 'light', id, pw));
    const closed = new Promise<void>((resolve) => device.once('close', () => resolve()));
    expect(await remove(id)).toEqual({ ok: true, status: 200, body: {} });
    await closed;
    await expect(connectDevice(broker.url, 'light', id, pw)).rejects.toThrow();
    // A missing credential is success.
    expect((await remove(id)).ok).toBe(true);
    expect((await remove(randomDeviceId())).ok).toBe(true);
  });

  it('captures device messages into DEVICE_IN with subject and headers, and ignores others', async () => {
    const id = randomDeviceId();
    const pw = password();
    await upsert(id, 'light', pw);
    const before = Date.now();
    const device = track(await connectDevice(broker.url, 'light', id, pw));
    await device.publishAsync(`light/${id}/status`, 'online', { qos: 1, retain: true });
    await device.publishAsync(`light/${id}/tele/heartbeat`, '{"uptime_s":1}', { qos: 0 });
    const binary = Buffer.from([0, 255, 10, 13, 1]);
    await device.publishAsync(`light/${id}/tdl/t.1 x`, binary, { qos: 1 });
    // Not a device topic of a known root (the admin may publish anywhere): ignored.
    const monitor = await admin();
    await monitor.publishAsync(`light/${id.toLowerCase()}/status`, 'x', { qos: 1 });
    await monitor.publishAsync('other/0123456789AB/status', 'x', { qos: 1 });

    const messages = await waitFor(async () => {
      const m = await readStream(nc, names.deviceIn, `${names.prefix}dev.in.>`);
      const mine = m.filter((x) => (x.headers['Mqtt-Topic'] ?? '').toLowerCase().includes(id.toLowerCase()) || (x.headers['Mqtt-Topic'] ?? '').startsWith('other/'));
      return mine.length >= 3 && mine;
    }, { what: 'captured messages' });
    await sleep(300);
    const all = (await readStream(nc, names.deviceIn, `${names.prefix}dev.in.>`)).filter((x) => (x.headers['Mqtt-Topic'] ?? '').toLowerCase().includes(id.toLowerCase()) || (x.headers['Mqtt-Topic'] ?? '').startsWith('other/'));
    expect(all).toHaveLength(3);
    const bySubject = Object.fromEntries(messages.map((m) => [m.subject, m]));
    const status = bySubject[`${names.prefix}dev.in.light.${id}.status`];
    expect(status?.string()).toBe('online');
    expect(status?.headers['Mqtt-Topic']).toBe(`light/${id}/status`);
    expect(status?.headers['Mqtt-Retain']).toBe('1');
    expect(status?.headers['Mqtt-Qos']).toBe('1');
    const at = Date.parse(status?.headers['Received-At'] ?? '');
    expect(status?.headers['Received-At']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(Date.now());
    const tele = bySubject[`${names.prefix}dev.in.light.${id}.tele.heartbeat`];
    expect(tele?.headers['Mqtt-Qos']).toBe('0');
    expect(tele?.headers['Mqtt-Retain']).toBe('0');
    const tdl = bySubject[`${names.prefix}dev.in.light.${id}.tdl.t_1_x`];
    expect(tdl?.headers['Mqtt-Topic']).toBe(`light/${id}/tdl/t.1 x`);
    expect(Buffer.from(tdl?.data ?? []).equals(binary)).toBe(true);
  });

  it('drops a message JetStream cannot hold and keeps capturing', async () => {
    const id = randomDeviceId();
    const pw = password();
    await upsert(id, 'light', pw);
    const device = track(await connectDevice(broker.url, 'light', id, pw));
    const maxPayload = nc.info?.max_payload ?? 1024 * 1024;
    await device.publishAsync(`light/${id}/tele/huge`, Buffer.alloc(maxPayload + 1024, 1), { qos: 1 });
    await device.publishAsync(`light/${id}/tele/after`, 'fine', { qos: 1 });
    const after = await waitFor(async () => (await readStream(nc, names.deviceIn, `${names.prefix}dev.in.light.${id}.>`)).filter((m) => m.subject.endsWith('.after')), { what: 'the message after' });
    expect(after.map((m) => m.string())).toEqual(['fine']);
    expect(await readStream(nc, names.deviceIn, `${names.prefix}dev.in.light.${id}.tele.huge`)).toEqual([]);
    expect(bridge.bridge.isConnected()).toBe(true);
  });

  it('publishes to a device after the broker took it, and captures it as dev.out', async () => {
    const id = randomDeviceId();
    const pw = password();
    await upsert(id, 'meter', pw);
    const device = track(await connectDevice(broker.url, 'meter', id, pw));
    await device.subscribeAsync(`meter/${id}/sys/#`, { qos: 2 });
    const received = new Promise<[string, string]>((resolve) => device.once('message', (t, p) => resolve([t, p.toString()])));
    const before = Date.now();
    const reply = await publish({ topic: `meter/${id}/sys/exe`, payload: 'query>', qos: 2, retain: false });
    expect(reply).toMatchObject({ ok: true, status: 200, body: { topic: `meter/${id}/sys/exe`, payload: 'query>' } });
    const sentAt = Date.parse(String((reply as { body?: { sent_at?: string } }).body?.sent_at));
    expect(sentAt).toBeGreaterThanOrEqual(before);
    expect(await received).toEqual([`meter/${id}/sys/exe`, 'query>']);
    const out = await waitFor(async () => (await readStream(nc, names.deviceIn, `${names.prefix}dev.out.meter.${id}.>`))[0], { what: 'dev.out capture' });
    expect(out.subject).toBe(`${names.prefix}dev.out.meter.${id}.sys.exe`);
    expect(out.string()).toBe('query>');
    expect(out.headers['Mqtt-Qos']).toBe('2');
    expect(out.headers['Received-At']).toBe(new Date(sentAt).toISOString());
    // Sent traffic is neither device traffic nor presence: no dev.in, no connectivity event.
    await sleep(500);
    expect(await readStream(nc, names.deviceIn, `${names.prefix}dev.in.meter.${id}.>`)).toEqual([]);
    const events = await readStream(nc, names.deviceEvents, `${names.prefix}evt.bridge.>`);
    expect(events.flatMap((e) => (e.json() as { events: { device_id: string }[] }).events).filter((e) => e.device_id === id)).toEqual([]);
  });

  it('publishes a batch message by message, one outcome each in order, and captures each as dev.out', async () => {
    const id = randomDeviceId();
    const pw = password();
    await upsert(id, 'light', pw);
    const device = track(await connectDevice(broker.url, 'light', id, pw));
    await device.subscribeAsync(`light/${id}/cmd/#`, { qos: 1 });
    const received: string[] = [];
    device.on('message', (t, p) => received.push(`${t} ${p.toString()}`));
    const before = Date.now();
    const reply = await publishBatch([
      { topic: `light/${id}/cmd/light1`, payload: 'solid:FF0000', qos: 1, retain: false, request_id: 'req-1' },
      { topic: `light/${id}/\u0085`, payload: 'x', qos: 1, retain: false, request_id: 'req-2' },
      { topic: `light/${id}/cmd/sound`, payload: 'off', qos: 1, retain: false },
    ]);
    expect(reply).toMatchObject({ ok: true, status: 200 });
    const results = (reply as unknown as { body: { results: Array<{ sent_at?: string; error?: unknown }> } }).body.results;
    expect(results).toHaveLength(3);
    expect(Date.parse(String(results[0]?.sent_at))).toBeGreaterThanOrEqual(before);
    // The topic the broker would drop the connection for is refused alone; the others went out.
    expect(results[1]).toEqual({ error: { status: 400, code: 'validation_error', message: "'topic' may not contain the control character U+0085" } });
    expect(Date.parse(String(results[2]?.sent_at))).toBeGreaterThanOrEqual(before);
    await waitFor(() => received.length === 2 || undefined, { what: 'both messages at the light' });
    expect(received).toEqual([`light/${id}/cmd/light1 solid:FF0000`, `light/${id}/cmd/sound off`]);
    const out = await waitFor(async () => {
      const captured = await readStream(nc, names.deviceIn, `${names.prefix}dev.out.light.${id}.>`);
      return captured.length === 2 ? captured : undefined;
    }, { what: 'dev.out captures' });
    expect(out.map((m) => [m.subject, m.string()])).toEqual([
      [`${names.prefix}dev.out.light.${id}.cmd.light1`, 'solid:FF0000'],
      [`${names.prefix}dev.out.light.${id}.cmd.sound`, 'off'],
    ]);
    // An empty batch or one past 64 messages is not a batch.
    expect(await publishBatch([])).toMatchObject({ ok: false, error: { status: 400 } });
    const tooMany = Array.from({ length: 65 }, () => ({ topic: `light/${id}/cmd/light2`, payload: 'off', qos: 1, retain: false }));
    expect(await publishBatch(tooMany)).toMatchObject({ ok: false, error: { status: 400 } });
  });

  it('turns presence and the last will into connectivity batches', async () => {
    const id = randomDeviceId();
    const pw = password();
    await upsert(id, 'light', pw);
    const device = track(await connectDevice(broker.url, 'light', id, pw));
    await device.publishAsync(`light/${id}/status`, 'online', { qos: 1, retain: true });
    await device.publishAsync(`light/${id}/tele/heartbeat`, '{}', { qos: 1 });
    await sleep(400);
    // The socket dies without DISCONNECT: the broker publishes the will.
    device.stream.destroy();
    type Batch = { events: { device_id: string; product: string; kind: string; at: string }[] };
    const mine = await waitFor(async () => {
      const events = (await readStream(nc, names.deviceEvents, `${names.prefix}evt.bridge.connectivity.batch.v1`)).flatMap((m) => (m.json() as Batch).events).filter((e) => e.device_id === id);
      return events.some((e) => e.kind === 'offline') && events;
    }, { what: 'offline event' });
    const seen = mine.filter((e) => e.kind === 'seen');
    expect(seen.length).toBeGreaterThanOrEqual(1);
    expect(seen[0]?.product).toBe('light');
    const offline = mine.find((e) => e.kind === 'offline');
    expect(Date.parse(offline?.at ?? '')).toBeGreaterThanOrEqual(Date.parse(seen[seen.length - 1]?.at ?? ''));
    // The capture has the will as the device's last status.
    const status = await readStream(nc, names.deviceIn, `${names.prefix}dev.in.light.${id}.status`);
    expect(status.map((m) => m.string())).toEqual(['online', 'offline']);
  });

  it('takes an empty retained status (a retained message cleared) for no device report: neither captured nor presence', async () => {
    const id = randomDeviceId();
    const other = randomDeviceId();
    // As the registry clears a removed device's status on a hook-mode broker: MQTT 3.1.1, no origin property.
    const clearer = await mqttConnect(broker.url, { username: broker.adminUsername, password: broker.adminPassword, protocolVersion: 4 }).then(track);
    await clearer.publishAsync(`light/${id}/status`, '', { qos: 1, retain: true });
    // A message after it on the same path through the bridge: once it is stored and counted, the clear was judged.
    await clearer.publishAsync(`light/${other}/tele/marker`, 'x', { qos: 1 });
    type Batch = { events: { device_id: string; kind: string }[] };
    const events = await waitFor(async () => {
      const all = (await readStream(nc, names.deviceEvents, `${names.prefix}evt.bridge.connectivity.batch.v1`)).flatMap((m) => (m.json() as Batch).events);
      return all.some((e) => e.device_id === other) && all;
    }, { what: "the marker's presence" });
    expect(events.filter((e) => e.device_id === id)).toEqual([]);
    expect(await readStream(nc, names.deviceIn, `${names.prefix}dev.in.light.${id}.status`)).toEqual([]);
    expect(await readStream(nc, names.deviceIn, `${names.prefix}dev.in.light.${other}.tele.marker`)).toHaveLength(1);
  });

  it('makes its streams again when they were deleted under it, and stores what devices sent meanwhile', async () => {
    const id = randomDeviceId();
    const pw = password();
    await upsert(id, 'light', pw);
    const device = track(await connectDevice(broker.url, 'light', id, pw));
    // A JetStream store lost, or an operator deleting the streams, while the bridge runs.
    await deleteStreams(nc, names.deviceIn, names.deviceEvents);
    await device.publishAsync(`light/${id}/status`, 'online', { qos: 1, retain: true });
    await device.publishAsync(`light/${id}/tele/heartbeat`, '{"uptime_s":2}', { qos: 1 });

    const captured = await waitFor(async () => {
      const m = await readStream(nc, names.deviceIn, `${names.prefix}dev.in.light.${id}.>`).catch(() => []);
      return m.length >= 2 && m;
    }, { timeoutMs: 15_000, what: 'the messages in the DEVICE_IN made again' });
    // Each capture is retried on its own, so their order in the stream may differ from the device's.
    expect(captured.map((m) => m.string()).sort()).toEqual(['online', '{"uptime_s":2}'].sort());
    type Batch = { events: { device_id: string; kind: string }[] };
    await waitFor(async () => {
      const batches = await readStream(nc, names.deviceEvents, `${names.prefix}evt.bridge.connectivity.batch.v1`).catch(() => []);
      return batches.flatMap((m) => (m.json() as Batch).events).some((e) => e.device_id === id && e.kind === 'seen');
    }, { timeoutMs: 15_000, what: 'the device seen in the DEVICE_EVENTS made again' });
    expect(bridge.bridge.isConnected()).toBe(true);
  });
});
