import { MqttProbe, SimulatedLight, type DeviceMessage } from '@fleet/device-sim';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { admin as staff, api, partnerWithKey, type Answer } from './support/api';
import { e2eFleet } from './support/fleet-env';

/**
 * Raw MQTT through the gateway (spec, System rule 7): a raw_mqtt_devices key publishes and reads
 * only under `light/<device id>/` of a device in its scope, and a read filter spanning devices is
 * refused; raw_mqtt_global reaches any topic. Published messages reach the simulated light
 * through Mosquitto; what it answers comes back from DEVICE_IN, newest first on the first read,
 * then oldest first along `next_cursor`.
 */

const SECRET = 'Raw-Mqtt-E2E-Sec';
const lights: SimulatedLight[] = [];
/** raw_mqtt_global, every device; provisions the lights. */
let globalKey: string;
/** raw_mqtt_devices, scoped to one organization that holds `inScope` only. */
let devicesKey: string;
/** Neither raw MQTT permission. */
let plainKey: string;
let inScope: SimulatedLight;
let outOfScope: SimulatedLight;

type Json = Record<string, unknown>;
type Row = { topic: string; payload: string; direction: string; received_at: string; qos: number; retain: boolean };

async function provisionLight(org?: string): Promise<SimulatedLight> {
  const id = randomDeviceId();
  const res = await api('POST', `/v1/devices/${id}`, { key: globalKey, body: { credential_format: 'derived-v1', product: 'light', credential_source: 'root_secret', root_secret: SECRET, ...(org ? { org } : {}) } });
  if (res.status !== 201) throw new Error(`provisioning ${id}: ${res.status} ${res.text}`);
  const light = new SimulatedLight({ brokerUrl: e2eFleet().mqttUrl, deviceId: id, rootSecret: SECRET });
  light.on('error', () => undefined);
  lights.push(light);
  await light.start();
  // The registry learns of the connection from the bridge's connectivity events, a moment later.
  await waitFor(async () => (await api('GET', `/v1/devices/${id}/system/status`, { key: globalKey })).body.status === 'connected', { what: `${id} connected` });
  return light;
}

const publish = (key: string, body: Json): Promise<Answer> => api('POST', '/v1/system/mqtt/messages', { key, body });

function read(key: string, query: Record<string, string | number>): Promise<Answer> {
  const qs = Object.entries(query)
    .map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`)
    .join('&');
  return api('GET', `/v1/system/mqtt/messages?${qs}`, { key });
}

const rowsOf = (res: Answer): Row[] => res.body.rows as Row[];
const sysExe = (m: DeviceMessage): boolean => m.sub === 'sys/exe';

beforeAll(async () => {
  const org = await staff('org', 'create', '--name', `Raw MQTT ${randomDeviceId()}`);
  globalKey = (await partnerWithKey(['--permissions', 'device_provisioning,system_read,raw_mqtt_global', '--access-all-devices'])).key;
  devicesKey = (await partnerWithKey(['--permissions', 'raw_mqtt_devices', '--grant', String(org.id)])).key;
  plainKey = (await partnerWithKey(['--permissions', 'system_read,system_control', '--grant', String(org.id)])).key;
  [inScope, outOfScope] = await Promise.all([provisionLight(String(org.name)), provisionLight()]);
}, 60_000);

afterAll(async () => {
  await Promise.all(lights.map((l) => l.stop().catch(() => undefined)));
});

describe('raw publish', () => {
  it('sends a raw_mqtt_devices key’s message under an in-scope device as written, and the device gets it', async () => {
    const exe = await publish(devicesKey, { topic: `light/${inScope.deviceId}/sys/exe`, payload: 'query>' });
    expect(exe.status).toBe(202);
    // QoS 2 by default on sys/*, no retain.
    expect(exe.body).toMatchObject({ topic: `light/${inScope.deviceId}/sys/exe`, payload: 'query>', qos: 2, retain: false, sent_at: expect.any(String) });
    const got = await inScope.waitFor('received', (m) => sysExe(m) && m.payload.toString() === 'query>');
    expect(got.qos).toBe(2);
    await inScope.waitFor('sent', (m) => m.sub === 'sys/resp' && m.payload.toString() === 'query>ok');

    const cmd = await publish(devicesKey, { topic: `light/${inScope.deviceId}/cmd/light1`, payload: 'raw-e2e-payload' });
    expect(cmd.status).toBe(202);
    expect(cmd.body).toMatchObject({ qos: 1, retain: false });
    expect((await inScope.waitFor('received', (m) => m.sub === 'cmd/light1' && m.payload.toString() === 'raw-e2e-payload')).qos).toBe(1);
  });

  it('refuses a raw_mqtt_devices key a device outside its scope, another root or a topic outside every device: 403, nothing sent', async () => {
    const before = outOfScope.received.length;
    for (const topic of [`light/${outOfScope.deviceId}/sys/exe`, `light/${randomDeviceId()}/sys/exe`, `meter/${inScope.deviceId}/sys/exe`, 'elsewhere/topic', `light/${inScope.deviceId}`]) {
      const res = await publish(devicesKey, { topic, payload: 'query>' });
      expect({ topic, status: res.status, code: res.body.code, needs: res.body.required_permission }).toEqual({ topic, status: 403, code: 'forbidden', needs: 'raw_mqtt_global' });
    }
    // A global key reaches the same device: the refusal above was the scope's, not the topic's.
    expect((await publish(globalKey, { topic: `light/${outOfScope.deviceId}/sys/exe`, payload: 'query>' })).status).toBe(202);
    const first = await outOfScope.waitFor('received', (m) => sysExe(m) && m.payload.toString() === 'query>');
    expect(outOfScope.received.slice(before).filter(sysExe)).toEqual([first]);
  });

  it('refuses wildcards in a topic to every key: 400', async () => {
    for (const key of [devicesKey, globalKey]) {
      for (const topic of [`light/${inScope.deviceId}/#`, `light/+/sys/exe`]) {
        const res = await publish(key, { topic, payload: 'query>' });
        expect({ topic, status: res.status, code: res.body.code }).toEqual({ topic, status: 400, code: 'validation_error' });
      }
    }
  });

  it('refuses a topic the broker cannot take (a control character): 400, and the next publish still goes through', async () => {
    const res = await publish(globalKey, { topic: `x/0\u0085/${inScope.deviceId}`, payload: 'query>' });
    expect([res.status, res.body.code]).toEqual([400, 'validation_error']);
    const next = await publish(globalKey, { topic: `light/${inScope.deviceId}/sys/exe`, payload: 'query>' });
    expect(next.status).toBe(202);
  });

  it('never sends a secret set> in clear: 409 encryption_unavailable where the topic names no device, nothing published', async () => {
    const { mqttUrl, mqttAdmin } = e2eFleet();
    const topics = ['foo/bar/sys/exe', 'sys/exe', 'light/5a0000000002/sys/exe', `light/${inScope.deviceId}/x/sys/exe`];
    const probe = await MqttProbe.open(mqttUrl, topics, { username: mqttAdmin.username, password: mqttAdmin.password });
    try {
      for (const topic of topics) {
        for (const payload of ['set>wifiPass=raw-e2e-clear-1', 'set>mqttPass=enc1:raw-e2e-clear-2']) {
          const res = await publish(globalKey, { topic, payload });
          expect({ topic, payload, status: res.status, code: res.body.code }).toEqual({ topic, payload, status: 409, code: 'encryption_unavailable' });
        }
        // A line without a secret still goes to such a topic: it arrives after anything sent before it.
        expect((await publish(globalKey, { topic, payload: 'query>' })).status).toBe(202);
        await probe.waitFor((m) => m.topic === topic && m.text === 'query>', 5000, `query> on ${topic}`);
      }
      expect(probe.messages.filter((m) => m.text.includes('raw-e2e-clear'))).toEqual([]);
    } finally {
      await probe.close();
    }
  });

  it('seals every secret set> for the device, a value that already starts with enc1: too, and the device opens it', async () => {
    const res = await publish(globalKey, { topic: `light/${inScope.deviceId}/sys/exe`, payload: 'set>wifiPass=enc1:looks-sealed' });
    expect(res.status).toBe(202);
    const payload = String(res.body.payload);
    expect(payload).toMatch(/^set>wifiPass=enc1:[A-Za-z0-9_-]+$/);
    expect(payload).not.toBe('set>wifiPass=enc1:looks-sealed');
    await inScope.waitFor('sent', (m) => m.sub === 'sys/resp' && m.payload.toString() === `${payload}>ok`);
    expect(inScope.pendingSettings.wifiPass).toBe('enc1:looks-sealed');
    expect(inScope.received.some((m) => m.payload.toString().includes('looks-sealed'))).toBe(false);
  });

  it('refuses a secret in a line that is not the protocol’s set>, and control characters in a sys/exe line: 400, nothing sent; elsewhere the payload is any text', async () => {
    const before = inScope.received.filter(sysExe).length;
    for (const payload of ['SET>wifiPass=raw-e2e-upper', ' set>wifiPass=raw-e2e-blank', 'query>\nset>wifiPass=raw-e2e-newline', 'a\u0001b']) {
      const res = await publish(globalKey, { topic: `light/${inScope.deviceId}/sys/exe`, payload });
      expect({ payload, status: res.status, code: res.body.code }).toEqual({ payload, status: 400, code: 'validation_error' });
    }
    // Every request refuses U+0000.
    const nul = await publish(globalKey, { topic: `light/${inScope.deviceId}/cmd/light1`, payload: 'a\u0000b' });
    expect([nul.status, nul.body.code]).toEqual([400, 'validation_error']);
    const binaryish = await publish(globalKey, { topic: `light/${inScope.deviceId}/cmd/light1`, payload: 'a\u0001b\tc\n' });
    expect(binaryish.status).toBe(202);
    await inScope.waitFor('received', (m) => m.sub === 'cmd/light1' && m.payload.toString() === 'a\u0001b\tc\n');
    expect((await publish(globalKey, { topic: `light/${inScope.deviceId}/sys/exe`, payload: 'query>' })).status).toBe(202);
    await inScope.waitFor('received', (m) => sysExe(m) && m.payload.toString() === 'query>');
    const sent = inScope.received.filter(sysExe).slice(before).map((m) => m.payload.toString());
    expect(sent.filter((p) => p !== 'query>')).toEqual([]);
  });

  it('is 403 without a raw MQTT permission, naming the one to ask for', async () => {
    const res = await publish(plainKey, { topic: `light/${inScope.deviceId}/sys/exe`, payload: 'query>' });
    expect([res.status, res.body.code, res.body.required_permission]).toEqual([403, 'forbidden', 'raw_mqtt_global']);
  });
});

describe('raw read', () => {
  const volumes = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);
  const ack = (v: number): string => `set>volume=${v}>ok`;

  /** Raw set> lines the device acknowledges in order on sys/resp; resolves once the last acknowledgement is captured. */
  async function acknowledged(values: number[]): Promise<void> {
    for (const v of values) expect((await publish(devicesKey, { topic: `light/${inScope.deviceId}/sys/exe`, payload: `set>volume=${v}` })).status).toBe(202);
    const last = ack(values[values.length - 1] as number);
    await waitFor(async () => rowsOf(await read(devicesKey, { topic: `light/${inScope.deviceId}/sys/resp`, limit: 1 }))[0]?.payload === last, { timeoutMs: 10_000, what: `${last} captured` });
  }

  it('takes since as epoch seconds as well as ISO 8601, and refuses anything else with 400', async () => {
    const topic = `light/${inScope.deviceId}/sys/resp`;
    await acknowledged([77]);
    for (const since of [String(Math.floor(Date.now() / 1000) - 600), new Date(Date.now() - 600_000).toISOString()]) {
      const res = await read(devicesKey, { topic, since, limit: 1000 });
      expect({ since, status: res.status }).toEqual({ since, status: 200 });
      expect(rowsOf(res).map((r) => r.payload)).toContain(ack(77));
    }
    const bad = await read(devicesKey, { topic, since: 'yesterday' });
    expect([bad.status, bad.body.code]).toEqual([400, 'validation_error']);
  });

  it('returns the newest rows first, then follows next_cursor oldest first with has_more', async () => {
    const topic = `light/${inScope.deviceId}/sys/resp`;
    await acknowledged(volumes(0, 5));
    const first = await read(devicesKey, { topic, limit: 3 });
    expect(first.status).toBe(200);
    expect(rowsOf(first).map((r) => r.payload)).toEqual([ack(4), ack(3), ack(2)]);
    expect(rowsOf(first)[0]).toMatchObject({ topic, direction: 'in', received_at: expect.any(String) });
    expect(first.body).toMatchObject({ has_more: false, next_cursor: expect.any(String) });

    // Nothing new yet: the cursor stands at the end.
    const idle = await read(devicesKey, { topic, limit: 2, cursor: String(first.body.next_cursor) });
    expect([rowsOf(idle), idle.body.has_more]).toEqual([[], false]);

    await acknowledged(volumes(5, 10));
    const seen: string[] = [];
    const more: boolean[] = [];
    let cursor = String(idle.body.next_cursor);
    for (let page = 0; page < 5; page += 1) {
      const res = await read(devicesKey, { topic, limit: 2, cursor });
      expect(res.status).toBe(200);
      seen.push(...rowsOf(res).map((r) => r.payload));
      more.push(res.body.has_more as boolean);
      cursor = String(res.body.next_cursor);
      if (res.body.has_more !== true) break;
    }
    expect(seen).toEqual(volumes(5, 10).map(ack));
    expect(more).toEqual([true, true, false]);

    // A cursor belongs to its filter.
    const other = await read(devicesKey, { topic: `light/${inScope.deviceId}/#`, cursor });
    expect([other.status, other.body.code]).toEqual([400, 'validation_error']);
  });

  it('reads both directions under one device, including what the platform sent it', async () => {
    await acknowledged([42]);
    const res = await read(devicesKey, { topic: `light/${inScope.deviceId}/sys/#`, limit: 20 });
    expect(res.status).toBe(200);
    const rows = rowsOf(res);
    const sent = rows.findIndex((r) => r.direction === 'out' && r.payload === 'set>volume=42');
    const answered = rows.findIndex((r) => r.direction === 'in' && r.payload === ack(42));
    expect(sent).toBeGreaterThanOrEqual(0);
    // Newest first: the acknowledgement comes before the line it answers.
    expect(answered).toBeGreaterThanOrEqual(0);
    expect(answered).toBeLessThan(sent);
    expect(rows[sent]).toMatchObject({ topic: `light/${inScope.deviceId}/sys/exe`, qos: 2 });
  });

  it('refuses a raw_mqtt_devices key a filter spanning devices (400) or outside its scope (403); a global key reads them', async () => {
    for (const topic of ['light/+/sys/resp', '#', '+/+/sys/resp', 'light/#']) {
      const res = await read(devicesKey, { topic });
      expect({ topic, status: res.status, code: res.body.code }).toEqual({ topic, status: 400, code: 'validation_error' });
    }
    for (const topic of [`light/${outOfScope.deviceId}/#`, `meter/${inScope.deviceId}/#`, 'elsewhere/#', `light/${inScope.deviceId}`]) {
      const res = await read(devicesKey, { topic });
      expect({ topic, status: res.status, code: res.body.code, needs: res.body.required_permission }).toEqual({ topic, status: 403, code: 'forbidden', needs: 'raw_mqtt_global' });
    }

    // Both lights answer a query, so the spanning filter has something of each to show.
    for (const light of [inScope, outOfScope]) expect((await publish(globalKey, { topic: `light/${light.deviceId}/sys/exe`, payload: 'query>' })).status).toBe(202);
    const spanning = await waitFor(
      async () => {
        const res = await read(globalKey, { topic: 'light/+/sys/resp', limit: 1000 });
        expect(res.status).toBe(200);
        const devices = new Set(rowsOf(res).map((r) => r.topic.split('/')[1]));
        return devices.has(inScope.deviceId) && devices.has(outOfScope.deviceId) ? res : undefined;
      },
      { timeoutMs: 10_000, what: 'both lights in a spanning read' },
    );
    expect(rowsOf(spanning).every((r) => /^light\/[0-9A-F]{12}\/sys\/resp$/.test(r.topic))).toBe(true);
    const everything = await read(globalKey, { topic: '#', limit: 5 });
    expect(everything.status).toBe(200);
    expect(rowsOf(everything)).toHaveLength(5);
  });

  it('is 403 without a raw MQTT permission, naming the one to ask for', async () => {
    const res = await read(plainKey, { topic: `light/${inScope.deviceId}/#` });
    expect([res.status, res.body.code, res.body.required_permission]).toEqual([403, 'forbidden', 'raw_mqtt_global']);
  });
});
