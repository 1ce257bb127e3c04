import { connect as natsConnect } from 'nats';
import { SimClock, SimulatedMeter } from '@fleet/device-sim';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { OwnFleet } from './support/own-fleet';

/**
 * Nothing the broker acknowledged is lost, whatever restarts: simulated meters publish interval
 * records at a steady rate (QoS 1) while (a) each mqtt-bridge replica is killed and started
 * again, (b) the broker is restarted, (c) the whole fleet is restarted. Every record a meter
 * got a PUBACK for is then listed once by the intervals route (by arrival), and nothing else.
 */

const SECRET = 'Delivery-Secr3t!';
const METERS = 8;
let fleet: OwnFleet;
let key: string;
const meters: SimulatedMeter[] = [];

beforeAll(async () => {
  fleet = await OwnFleet.start({
    services: ['device-registry', 'meter', 'mqtt-bridge', 'gateway'],
    replicas: { 'mqtt-bridge': 2 },
    env: { MQTT_BACKSTOP_CHECK_MS: '500' },
  });
  ({ key } = await fleet.partnerWithKey(['--permissions', 'device_provisioning,energy_read', '--access-all-devices']));
  for (let i = 0; i < METERS; i += 1) {
    const deviceId = randomDeviceId();
    const res = await fleet.api('POST', `/v1/devices/${deviceId}`, {
      key,
      body: { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET, product: 'meter' },
    });
    expect(res.status).toBe(201);
    // 10-second intervals at 40x: four records a second per meter, ~30 a second in all.
    const meter = new SimulatedMeter({ brokerUrl: fleet.mqttUrl, deviceId, rootSecret: SECRET, clock: new SimClock({ speed: 40 }), intervalSec: 10, reconnectMs: 300 });
    meters.push(meter);
  }
  await Promise.all(meters.map((m) => m.start()));
}, 120_000);

afterAll(async () => {
  await Promise.all(meters.map((m) => m.stop().catch(() => undefined)));
  await fleet?.destroy();
}, 60_000);

/** Records sent so far by all meters. */
const sentCount = () => meters.reduce((n, m) => n + m.sentRecords.length, 0);

/** Lets the meters send at least n more records. */
async function keepSending(n: number): Promise<void> {
  const target = sentCount() + n;
  await waitFor(() => sentCount() >= target, { timeoutMs: 30_000, what: `${n} more records` });
}

/** Every record of the device, by arrival, as `sid/seq` (duplicates kept). */
async function storedKeys(deviceId: string): Promise<string[]> {
  const keys: string[] = [];
  let next = `received_since=2000-01-01T00:00:00Z&limit=1000`;
  for (;;) {
    const res = await fleet.api('GET', `/v1/meter/devices/${deviceId}/intervals?${next}`, { key });
    expect(res.status).toBe(200);
    for (const r of res.body.records as Array<{ sid: string; seq: number }>) keys.push(`${r.sid}/${r.seq}`);
    if (!res.body.has_more) return keys;
    next = `cursor=${String(res.body.next_cursor)}&limit=1000`;
  }
}

/** Where missing records are: captured in DEVICE_IN or not, and the meter consumer's state (for the failure message). */
async function whereAre(deviceId: string, keys: string[]): Promise<string> {
  const nc = await natsConnect({ servers: fleet.handle.natsUrl });
  try {
    const jsm = await nc.jetstreamManager();
    const consumer = await jsm.consumers.info('DEVICE_IN', 'meter-ingest');
    const found: string[] = [];
    const stream = await jsm.streams.info('DEVICE_IN');
    for (let seq = stream.state.first_seq; seq <= stream.state.last_seq; seq++) {
      const m = await jsm.streams.getMessage('DEVICE_IN', { seq }).catch(() => undefined);
      if (!m || m.subject !== `dev.in.meter.${deviceId}.iv`) continue;
      const r = JSON.parse(new TextDecoder().decode(m.data)) as { sid: string; seq: number };
      if (keys.includes(`${r.sid}/${r.seq}`)) found.push(`${r.sid}/${r.seq} at stream seq ${seq}`);
    }
    return `in DEVICE_IN: [${found.join('; ')}]; meter-ingest: ack floor ${consumer.ack_floor.stream_seq}, ack pending ${consumer.num_ack_pending}, redelivered ${consumer.num_redelivered}, pending ${consumer.num_pending}`;
  } finally {
    await nc.close();
  }
}

it('stores every acknowledged record exactly once across bridge kills, a broker restart and a fleet restart', async () => {
  await keepSending(40);

  // (a) Each bridge replica killed in turn; the launcher starts it again.
  for (const replica of [0, 1]) {
    const before = fleet.handle.pidOf('mqtt-bridge', replica);
    await fleet.handle.kill('mqtt-bridge', { replica, signal: 'SIGKILL' });
    await keepSending(20);
    await fleet.handle.waitReady('mqtt-bridge', { replica, timeoutMs: 30_000 });
    expect(fleet.handle.pidOf('mqtt-bridge', replica)).not.toBe(before);
    await keepSending(20);
  }

  // (b) The broker stopped and started again; meters reconnect and flush what they hold.
  await fleet.handle.restartBroker();
  await keepSending(60);

  // (c) The whole fleet stopped and started again while the meters keep recording.
  await fleet.restart();
  await keepSending(60);

  // Stop recording, then wait until the broker acknowledged everything the meters sent.
  for (const m of meters) m.misbehave({ silent: true });
  await waitFor(() => meters.every((m) => m.connected && m.unacknowledged === 0), { timeoutMs: 30_000, what: 'every record acknowledged' });

  const keyOf = (s: { record: { sid: string; seq: number } }) => `${s.record.sid}/${s.record.seq}`;
  for (const meter of meters) {
    // What the broker acknowledged must be stored. A publish the meter's MQTT client failed
    // (queued while a reconnect's resend was cut short) never reached the broker: it may be
    // missing, but nothing that was not sent may appear.
    const acknowledged = new Set(meter.sentRecords.filter((s) => s.acknowledged).map(keyOf));
    const sent = new Set(meter.sentRecords.map(keyOf));
    expect(acknowledged.size).toBeGreaterThan(30);
    expect(acknowledged.size).toBeGreaterThan(sent.size * 0.9);
    const stored = await waitFor(
      async () => {
        const keys = await storedKeys(meter.deviceId);
        return [...acknowledged].every((k) => keys.includes(k)) ? keys : undefined;
      },
      // A record the meter service had taken when the fleet was stopped and did not settle comes
      // back after its consumer's ack wait (30 s from the restart): wait well past it.
      { timeoutMs: 90_000, intervalMs: 500, what: `records of ${meter.deviceId}` },
    ).catch(async () => storedKeys(meter.deviceId));
    expect(stored.length).toBe(new Set(stored).size);
    const missing = [...acknowledged].filter((k) => !stored.includes(k));
    if (missing.length > 0) throw new Error(`acknowledged but not stored: ${missing.join(', ')}; ${await whereAre(meter.deviceId, missing)}`);
    expect(stored.filter((k) => !sent.has(k))).toEqual([]);
  }
}, 420_000);
