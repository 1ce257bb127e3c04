import { SimClock, SimulatedLight, SimulatedMeter } from '@fleet/device-sim';
import { randomDeviceId, waitFor, WebhookReceiver } from '@fleet/test-kit';
import { admin, api, partnerWithKey } from './support/api';
import { ALERT_PERIOD_MS, e2eFleet } from './support/fleet-env';
import { mp3, uploadPlatformFile } from './support/platform-files';

/**
 * Push events end to end: devices and partners act through the broker and the gateway, the
 * owning services write their events with their changes, the events service fans them out and
 * delivers them signed to a receiver here, which checks every signature with the
 * `standardwebhooks` package; and the live stream through the gateway, resumed with
 * Last-Event-ID.
 */

const SECRET = 'Events-E2E-Secr!';
type Json = Record<string, unknown>;
type Partner = Awaited<ReturnType<typeof partnerWithKey>>;

const devices: Array<{ stop(): Promise<void> }> = [];
const receivers: WebhookReceiver[] = [];
let home: { id: number; name: string };
let away: { id: number; name: string };
/** Scoped to `home`: may read health, configuration, the system interface and energy. */
let watcher: Partner;
/** Every device: moves devices between nodes. */
let operator: Partner;

const PERMISSIONS = 'webhook_manage,events_read,device_provisioning,health_read,config_read,config_write,profile_manage,signal_manage,system_read,system_control,file_upload,energy_read';

beforeAll(async () => {
  home = (await admin('org', 'create', '--name', `Home ${randomDeviceId()}`)) as typeof home;
  away = (await admin('org', 'create', '--name', `Away ${randomDeviceId()}`)) as typeof away;
  watcher = await partnerWithKey(['--permissions', PERMISSIONS, '--grant', String(home.id)]);
  operator = await partnerWithKey(['--permissions', `${PERMISSIONS},device_removal`, '--access-all-devices']);
}, 60_000);

afterAll(async () => {
  await Promise.all(devices.map((d) => d.stop().catch(() => undefined)));
  await Promise.all(receivers.map((r) => r.close()));
});

async function expectStatus(answer: Promise<{ status: number; body: Json; text: string }>, status: number): Promise<Json> {
  const res = await answer;
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status} ${res.text}`);
  return res.body;
}

/** A receiver here and an endpoint of the partner delivering the types to it. */
async function subscribe(partner: Partner, eventTypes: string[]): Promise<{ receiver: WebhookReceiver; webhookId: string }> {
  const receiver = await new WebhookReceiver().start();
  receivers.push(receiver);
  const created = await expectStatus(api('POST', '/v1/webhooks', { key: partner.key, body: { url: receiver.url, event_types: eventTypes } }), 201);
  receiver.trust(String(created.secret));
  return { receiver, webhookId: String(created.id) };
}

async function provision(partner: Partner, product: 'light' | 'meter', org = home.name): Promise<string> {
  const id = randomDeviceId();
  await expectStatus(api('POST', `/v1/devices/${id}`, { key: partner.key, body: { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET, product, org } }), 201);
  return id;
}

async function startLight(id: string, options: Partial<ConstructorParameters<typeof SimulatedLight>[0]> = {}): Promise<SimulatedLight> {
  const light = new SimulatedLight({ brokerUrl: e2eFleet().mqttUrl, deviceId: id, rootSecret: SECRET, ...options });
  light.on('error', () => undefined);
  devices.push(light);
  await light.start();
  return light;
}

/** Deliveries of the device's events of a type that the receiver accepted. */
const accepted = (receiver: WebhookReceiver, type: string, deviceId: string) => receiver.accepted().filter((d) => d.event.type === type && d.event.device_id === deviceId);

/** The delivery log of an endpoint. */
async function deliveries(partner: Partner, webhookId: string): Promise<Json[]> {
  return (await expectStatus(api('GET', `/v1/webhooks/${webhookId}/deliveries?limit=200`, { key: partner.key }), 200)).deliveries as Json[];
}

it('a device connecting arrives once, signed, with the connectivity the device resource shows', async () => {
  const { receiver, webhookId } = await subscribe(watcher, ['device.provisioned', 'device.connected']);
  const id = await provision(watcher, 'light');
  await startLight(id);
  const [delivery] = await waitFor(() => (accepted(receiver, 'device.connected', id).length ? accepted(receiver, 'device.connected', id) : undefined), { timeoutMs: 10_000, what: 'device.connected' });
  const device = await expectStatus(api('GET', `/v1/devices/${id}`, { key: watcher.key }), 200);
  expect(delivery!.event).toMatchObject({ type: 'device.connected', version: 1, device_id: id, data: { status: 'connected', status_changed_at: device.status_changed_at } });
  expect(delivery!.headers['webhook-id']).toBe(delivery!.event.id);
  expect(accepted(receiver, 'device.provisioned', id)[0]!.event.data).toEqual({ product: 'light', name: null, org_node_id: home.id });
  // Once: the log holds one delivery of it, and every delivery was signed.
  const log = await deliveries(watcher, webhookId);
  expect(log.filter((d) => d.event_type === 'device.connected' && d.device_id === id)).toHaveLength(1);
  expect(accepted(receiver, 'device.connected', id)).toHaveLength(1);
  expect(receiver.received.every((d) => d.verified)).toBe(true);
});

it('a receiver failing three times gets the event on the fourth attempt', async () => {
  const { receiver, webhookId } = await subscribe(watcher, ['device.provisioned']);
  receiver.failures = 3;
  const id = await provision(watcher, 'meter');
  await waitFor(() => accepted(receiver, 'device.provisioned', id).length === 1, { timeoutMs: 15_000, what: 'the fourth attempt' });
  const attempts = receiver.received.filter((d) => d.event.device_id === id);
  expect(attempts.map((d) => d.status)).toEqual([503, 503, 503, 204]);
  expect(new Set(attempts.map((d) => d.event.id)).size).toBe(1);
  expect(attempts.every((d) => d.verified)).toBe(true);
  const [logged] = (await deliveries(watcher, webhookId)).filter((d) => d.device_id === id);
  expect(logged).toMatchObject({ state: 'succeeded', attempts: 4, last_attempt: { status: 204, error: null } });
});

it('an alert level change arrives once with the levels and the sensor readings', async () => {
  const { receiver } = await subscribe(watcher, ['alert.level_changed']);
  const id = await provision(watcher, 'light');
  const light = await startLight(id, { sensors: [{ tdlId: 'fridge.1', periodSec: 1 }] });
  const { id: profileId } = await expectStatus(
    api('POST', '/v1/profiles', { key: watcher.key, body: { name: `Fridge ${id}`, rules: [{ all: [{ metric: 'latest_temp_c', op: '>', value: 8 }], level: 'WARNING' }], default: 'CLEAR' } }),
    201,
  );
  await expectStatus(api('POST', `/v1/devices/${id}/sensors`, { key: watcher.key, body: { tdl_id: 'fridge.1', profile_id: profileId } }), 201);
  await waitFor(async () => (await api('GET', `/v1/devices/${id}/config`, { key: watcher.key })).body.alert_level === 'CLEAR', { timeoutMs: 20 * ALERT_PERIOD_MS, what: 'CLEAR' });
  light.setSensor('fridge.1', { temp_c: 9.5, breach: true });
  const warning = await waitFor(() => accepted(receiver, 'alert.level_changed', id).find((d) => d.event.data.to === 'WARNING'), { timeoutMs: 20 * ALERT_PERIOD_MS, what: 'the WARNING event' });
  expect(warning.event.data).toMatchObject({ from: 'CLEAR', to: 'WARNING', sensors: [expect.objectContaining({ tdl_id: 'fridge.1' })] });
  expect(warning.verified).toBe(true);
  expect(accepted(receiver, 'alert.level_changed', id).filter((d) => d.event.data.to === 'WARNING')).toHaveLength(1);
}, 60_000);

it('a file push settling arrives once with the transfer as the transfer route shows it', async () => {
  const { receiver } = await subscribe(watcher, ['file_transfer.settled']);
  const id = await provision(watcher, 'light');
  await startLight(id, { fetchFiles: true });
  await waitFor(async () => (await api('GET', `/v1/devices/${id}`, { key: watcher.key })).body.status === 'connected', { what: 'the light connected' });
  const name = `chime-${id}.mp3`;
  expect((await uploadPlatformFile(watcher.key, 'files', name, mp3(40))).status).toBe(201);
  const pushed = await expectStatus(api('POST', `/v1/devices/${id}/files`, { key: watcher.key, body: { name } }), 202);
  const settled = await waitFor(() => accepted(receiver, 'file_transfer.settled', id)[0], { timeoutMs: 20_000, what: 'file_transfer.settled' });
  const transfer = await expectStatus(api('GET', `/v1/devices/${id}/files/${String(pushed.transfer_id)}`, { key: watcher.key }), 200);
  expect(settled.event.data).toMatchObject({ transfer_id: pushed.transfer_id, device_id: id, state: 'succeeded', terminal: true });
  expect(settled.event.data).toEqual(transfer);
  expect(accepted(receiver, 'file_transfer.settled', id)).toHaveLength(1);
}, 40_000);

it('a meter batch arrives as one event whose cursor lists exactly the batch', async () => {
  const { receiver } = await subscribe(watcher, ['meter.records_stored']);
  const id = await provision(watcher, 'meter');
  const meter = new SimulatedMeter({ brokerUrl: e2eFleet().mqttUrl, deviceId: id, rootSecret: SECRET, clock: new SimClock({ speed: 7200, origin: Date.now() }), intervalSec: 900 });
  devices.push(meter);
  await meter.start();
  const batch = await waitFor(() => accepted(receiver, 'meter.records_stored', id)[0], { timeoutMs: 20_000, what: 'meter.records_stored' });
  const { count, cursor } = batch.event.data as { count: number; cursor: string };
  expect(count).toBeGreaterThanOrEqual(1);
  const listed = await expectStatus(api('GET', `/v1/meter/devices/${id}/intervals?cursor=${encodeURIComponent(cursor)}&limit=${count}`, { key: watcher.key }), 200);
  expect(listed.records as Json[]).toHaveLength(count);
  expect(batch.verified).toBe(true);
}, 40_000);

it('a device moved out of the partner’s scope stops producing events for it', async () => {
  const watching = await subscribe(watcher, ['device.moved', 'device.connected']);
  // A partner that sees every device: once its delivery exists, the event was fanned out.
  const everyone = await subscribe(operator, ['device.connected']);
  const id = await provision(watcher, 'light');
  await expectStatus(api('PUT', `/v1/devices/${id}/org`, { key: operator.key, body: { org_node_id: away.id } }), 204);
  const moved = await waitFor(() => watching.receiver.accepted().find((d) => d.event.type === 'device.moved' && d.event.device_id === id), { what: 'device.moved' });
  // The node it reached lies outside the watcher's scope: the event does not name it.
  expect(moved.event.data).toEqual({ from_org_node_id: home.id, to_org_node_id: null });
  await startLight(id);
  await waitFor(() => accepted(everyone.receiver, 'device.connected', id).length === 1, { timeoutMs: 10_000, what: 'the connection fanned out' });
  expect((await deliveries(watcher, watching.webhookId)).filter((d) => d.event_type === 'device.connected' && d.device_id === id)).toEqual([]);
  expect(accepted(watching.receiver, 'device.connected', id)).toEqual([]);
});

describe('live stream', () => {
  interface StreamEvent {
    id: string;
    type: string;
    event: { id: string; device_id?: string; type: string };
  }

  /** GET /v1/events through the gateway, collecting events until closed. */
  async function openStream(key: string, query = '', lastEventId?: string) {
    const abort = new AbortController();
    const res = await fetch(`${e2eFleet().gatewayUrl}/v1/events${query}`, {
      headers: { Authorization: `Bearer ${key}`, ...(lastEventId ? { 'Last-Event-ID': lastEventId } : {}) },
      signal: abort.signal,
    });
    const events: StreamEvent[] = [];
    const reading = (async () => {
      if (!res.body) return;
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of res.body) {
          buffer += decoder.decode(chunk as Uint8Array, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const lines = buffer.slice(0, end).split('\n');
            buffer = buffer.slice(end + 2);
            const field = (name: string) => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
            const data = field('data');
            if (data) events.push({ id: field('id') as string, type: field('event') as string, event: JSON.parse(data) });
          }
        }
      } catch {
        // Aborted.
      }
    })();
    return { res, events, close: async () => { abort.abort(); await reading; } };
  }

  it('streams the partner’s events and resumes after Last-Event-ID with nothing missed or twice', async () => {
    const first = await openStream(watcher.key, '?types=device.provisioned');
    expect(first.res.status).toBe(200);
    expect(first.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const before = [await provision(watcher, 'light'), await provision(watcher, 'meter')];
    await waitFor(() => before.every((id) => first.events.some((e) => e.event.device_id === id)), { timeoutMs: 10_000, what: 'the first events' });
    await first.close();
    const lastSeen = first.events[first.events.length - 1]!.id;
    // Published while no stream was open.
    const during = [await provision(watcher, 'light'), await provision(watcher, 'light')];
    const resumed = await openStream(watcher.key, '?types=device.provisioned', lastSeen);
    expect(resumed.res.status).toBe(200);
    const after = [await provision(watcher, 'meter')];
    const expected = [...before, ...during, ...after];
    await waitFor(() => [...first.events, ...resumed.events].filter((e) => expected.includes(e.event.device_id as string)).length >= expected.length, { timeoutMs: 10_000, what: 'every event' });
    await resumed.close();
    const seen = [...first.events, ...resumed.events].filter((e) => expected.includes(e.event.device_id as string)).map((e) => e.event.device_id);
    expect(seen).toEqual(expected);
    // Only the watcher's scope and the asked type.
    expect([...first.events, ...resumed.events].every((e) => e.type === 'device.provisioned')).toBe(true);
  }, 30_000);

  it('refuses a partner without events_read, unknown types and a device out of scope', async () => {
    const reader = await partnerWithKey(['--permissions', 'health_read', '--access-all-devices']);
    const refused = await api('GET', '/v1/events', { key: reader.key });
    expect([refused.status, refused.body.code, refused.body.required_permission]).toEqual([403, 'forbidden', 'events_read']);
    expect((await api('GET', '/v1/events?types=device.exploded', { key: watcher.key })).status).toBe(400);
    const elsewhere = await provision(operator, 'light', away.name);
    expect((await api('GET', `/v1/events?device_id=${elsewhere}`, { key: watcher.key })).status).toBe(404);
  });
});
