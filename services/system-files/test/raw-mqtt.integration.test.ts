/**
 * Raw MQTT publish and read on real NATS, JetStream and Postgres: publishes go through the
 * bridge client to a bridge stand-in and scope and sealing through the registry client to a
 * registry stand-in, under a subject prefix of this file's own; reads come from a DEVICE_IN
 * stream of the file's own, filled as the bridge captures traffic.
 */
import { headers, type JetStreamClient } from 'nats';
import type { Permission, Principal } from '@fleet/contracts';
import { captureSubject, DEFAULT_TOPIC_ROOTS, parseDeviceTopic, type Direction } from '@fleet/device-protocol';
import { ApiError, type Bus, type HandlerContext, type RequestOf } from '@fleet/service-kit';
import { BridgeStandIn, principal, randomDeviceId, RegistryStandIn, rejectionOf, uniqueId } from '@fleet/test-kit';
import { publishRaw, readRaw } from '../src/handlers/raw-mqtt';
import type { SystemDeps } from '../src/handlers/deps';
import { DeviceInHistory } from '../src/history/device-in-history';
import { saveSettings } from '../src/store/settings';
import { captured, createTestDb, logger, startTestbed, type TestDb, type Testbed } from './support';

let testDb: TestDb;
let bed: Testbed;
let bus: Bus;
let js: JetStreamClient;
let stream: Testbed['stream'];
let deps: SystemDeps;
let bridge: BridgeStandIn;
let registry: RegistryStandIn;

const context = (ms = 10_000): HandlerContext => {
  const deadline = Date.now() + ms;
  return { logger, deadline, remainingMs: () => Math.max(0, deadline - Date.now()), beforeCommit: async () => undefined };
};
const keyWith = (...permissions: Permission[]): Principal => principal({ permissions });
const GLOBAL = keyWith('raw_mqtt_global');
const DEVICES = keyWith('raw_mqtt_devices');

type PublishBody = { topic: string; payload: string; retain?: boolean; qos?: number };
type Row = { topic: string; payload: string; direction: Direction; received_at: string; qos: number; retain: boolean };
type Page = { rows: Row[]; has_more: boolean; next_cursor: string; server_now: string };

const publish = (body: PublishBody, who: Principal = GLOBAL) =>
  publishRaw(deps, { request_id: uniqueId('r'), params: {}, query: {}, principal: who, body } as RequestOf<'system.mqtt.publish'>, context());

async function read(query: { topic: string; limit?: number; cursor?: string; since?: string }, who: Principal = GLOBAL, ctx = context(), history?: DeviceInHistory): Promise<Page> {
  const using = history ? { ...deps, history } : deps;
  const answer = await readRaw(using, { request_id: uniqueId('r'), params: {}, query, principal: who } as RequestOf<'system.mqtt.read'>, ctx);
  expect(answer.status).toBe(200);
  return answer.body as unknown as Page;
}

/** Captures a message exactly as the bridge does, for topics test/support's captured() cannot spell (levels holding '.'). */
async function capture(topic: string, payload: string, direction: Direction = 'in'): Promise<void> {
  const device = parseDeviceTopic(topic, DEFAULT_TOPIC_ROOTS);
  if (!device) throw new Error(`not a device topic: ${topic}`);
  const h = headers();
  h.set('Mqtt-Topic', topic);
  h.set('Received-At', new Date().toISOString());
  h.set('Mqtt-Retain', '0');
  h.set('Mqtt-Qos', '1');
  h.set('Nats-Msg-Id', uniqueId('msg'));
  await js.publish(captureSubject(stream.prefix, direction, device), Buffer.from(payload), { headers: h });
}

/** Puts `count` telemetry messages `<tag><i>` on `light/<id>/tele/<kind>`. */
async function tele(deviceId: string, tag: string, count: number, kind = 'power'): Promise<void> {
  for (let i = 0; i < count; i += 1) await captured(js, stream.prefix, { deviceId, levels: `tele/${kind}`, payload: `${tag}${i}` });
}

const inScope = (deviceId: string, product: 'light' | 'meter' = 'light') => registry.devices.set(deviceId, { device_id: deviceId, product, org_node_id: 1, name: null });

beforeAll(async () => {
  testDb = await createTestDb();
  bed = await startTestbed({ db: testDb.db });
  ({ bus, js, stream, bridge, registry, deps } = bed);
});

afterAll(async () => {
  await bed?.close();
  await testDb?.drop();
});

beforeEach(() => {
  bridge.reset();
  registry.reset();
});

describe('raw publish', () => {
  it('defaults to QoS 2 on sys/* topics and 1 elsewhere, never retained unless asked', async () => {
    const id = randomDeviceId();
    const topics = [`light/${id}/sys/exe`, `meter/${id}/sys/custom`, `light/${id}/cmd/light1`, 'custom/topic'];
    const answers = [];
    for (const topic of topics) answers.push(await publish({ topic, payload: 'x' }));
    expect(bridge.published).toEqual([
      { topic: topics[0], payload: 'x', qos: 2, retain: false },
      { topic: topics[1], payload: 'x', qos: 2, retain: false },
      { topic: topics[2], payload: 'x', qos: 1, retain: false },
      { topic: topics[3], payload: 'x', qos: 1, retain: false },
    ]);
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 202]);
    expect(answers[0]?.body).toEqual({ topic: topics[0], payload: 'x', sent_at: expect.any(String), qos: 2, retain: false });
    expect(Number.isNaN(Date.parse(String((answers[0]?.body as { sent_at?: string } | undefined)?.sent_at)))).toBe(false);
  });

  it('sends the QoS and retain flag given, even where the device protocol has its own QoS', async () => {
    const id = randomDeviceId();
    await publish({ topic: `light/${id}/sys/exe`, payload: 'query>', qos: 0 });
    await publish({ topic: `light/${id}/cmd/light1`, payload: 'off', qos: 2, retain: true });
    const answer = await publish({ topic: `light/${id}/status`, payload: '', qos: 1, retain: true });
    expect(bridge.published).toEqual([
      { topic: `light/${id}/sys/exe`, payload: 'query>', qos: 0, retain: false },
      { topic: `light/${id}/cmd/light1`, payload: 'off', qos: 2, retain: true },
      { topic: `light/${id}/status`, payload: '', qos: 1, retain: true },
    ]);
    expect(answer.body).toMatchObject({ qos: 1, retain: true, payload: '' });
  });

  it.each([['light/+/sys/exe'], ['light/0123456789AB/#'], ['$SYS/broker/clients']])('refuses the topic %j with 400, nothing published', async (topic) => {
    const err = await rejectionOf(publish({ topic, payload: 'x' }), ApiError);
    expect([err.status, err.code]).toEqual([400, 'validation_error']);
    expect(bridge.published).toEqual([]);
  });

  it('raw_mqtt_devices: only under <root>/<id>/ of a device in scope (and of its product), else 403 naming raw_mqtt_global', async () => {
    const mine = randomDeviceId();
    const other = randomDeviceId();
    inScope(mine);
    const ok = await publish({ topic: `light/${mine}/cmd/light1`, payload: 'solid:FF0000' }, DEVICES);
    expect(ok.status).toBe(202);
    for (const topic of [`light/${other}/cmd/light1`, `meter/${mine}/sys/exe`, 'custom/topic', `light/${mine}`, `light/${mine.toLowerCase()}/x`]) {
      const err = await rejectionOf(publish({ topic, payload: 'x' }, DEVICES), ApiError);
      expect([err.status, err.code, err.options.requiredPermission]).toEqual([403, 'forbidden', 'raw_mqtt_global']);
    }
    expect(bridge.published).toEqual([{ topic: `light/${mine}/cmd/light1`, payload: 'solid:FF0000', qos: 1, retain: false }]);
    // The scope was asked for the device with the partner's principal.
    expect(registry.requests.find((r) => r.subject === 'registry.scope.resolve')?.envelope.principal?.partner_id).toBe(DEVICES.partner_id);
  });

  it('a key without either raw permission is 403', async () => {
    const err = await rejectionOf(publish({ topic: 'custom/x', payload: 'x' }, keyWith('system_control')), ApiError);
    expect([err.status, err.code]).toEqual([403, 'forbidden']);
    expect(bridge.published).toEqual([]);
  });

  it('seals a secret set> on sys/exe: the bridge and the answer carry only the enc1: value', async () => {
    const id = randomDeviceId();
    registry.sealing.add(id);
    const answer = await publish({ topic: `light/${id}/sys/exe`, payload: 'set>wifiPass=hunter2;x' });
    const sent = bridge.published[0];
    expect(sent?.payload).toMatch(/^set>wifiPass=enc1:[A-Za-z0-9_-]+$/);
    expect(JSON.stringify(bridge.published)).not.toContain('hunter2');
    expect(answer.body).toMatchObject({ topic: `light/${id}/sys/exe`, payload: sent?.payload, qos: 2 });
    // The whole value after the first '=' was sealed (the registry stand-in's envelope shows what it took).
    expect(Buffer.from((sent?.payload ?? '').slice('set>wifiPass=enc1:'.length), 'base64url').toString()).toBe(`${id}|wifiPass|hunter2;x`);
  });

  it('leaves other lines and other topics as written', async () => {
    const id = randomDeviceId();
    registry.sealing.add(id);
    const lines = ['set>volume=5', 'SET>volume=5', 'query>', 'set>apiToken', 'query>wifiPass=x'];
    for (const payload of lines) await publish({ topic: `light/${id}/sys/exe`, payload });
    await publish({ topic: `light/${id}/sys/other`, payload: 'set>wifiPass=clear' });
    expect(bridge.published.map((p) => p.payload)).toEqual([...lines, 'set>wifiPass=clear']);
    expect(registry.requests.filter((r) => r.subject === 'registry.settings.seal')).toEqual([]);
  });

  it('seals a secret value that already starts with enc1: (it is the partner’s plaintext), as the settings route does', async () => {
    const id = randomDeviceId();
    registry.sealing.add(id);
    const answer = await publish({ topic: `light/${id}/sys/exe`, payload: 'set>wifiPass=enc1:abc' });
    const sent = bridge.published[0]?.payload ?? '';
    expect(sent).toMatch(/^set>wifiPass=enc1:[A-Za-z0-9_-]+$/);
    expect(sent).not.toBe('set>wifiPass=enc1:abc');
    expect(Buffer.from(sent.slice('set>wifiPass=enc1:'.length), 'base64url').toString()).toBe(`${id}|wifiPass|enc1:abc`);
    expect(answer.body).toMatchObject({ payload: sent });
  });

  it.each([['foo/bar/sys/exe'], ['sys/exe'], ['/sys/exe'], ['light/5a0000000002/sys/exe'], ['other/5A0000000002/sys/exe'], ['light/5A0000000002/x/sys/exe']])(
    '409 encryption_unavailable, nothing published, for a secret set> on %j, which names no device to seal for',
    async (topic) => {
      registry.sealing.add('5A0000000002');
      for (const payload of ['set>wifiPass=hunter2', 'set>mqttPass=enc1:abc']) {
        const err = await rejectionOf(publish({ topic, payload }), ApiError);
        expect([err.status, err.code]).toEqual([409, 'encryption_unavailable']);
      }
      expect(bridge.published).toEqual([]);
      // Lines without a secret value still go as written to such a topic.
      await publish({ topic, payload: 'query>' });
      expect(bridge.published.map((p) => p.payload)).toEqual(['query>']);
    },
  );

  it('refuses a secret key in a line that reads as a set but is not the protocol’s (the verb’s case, blanks): 400, nothing published', async () => {
    const id = randomDeviceId();
    registry.sealing.add(id);
    for (const payload of ['SET>wifiPass=abc12345', 'Set>mqttPass=x', ' set>wifiPass=abc', 'set >wifiPass=abc', 'SET>volume=5;wifiPass=abc']) {
      const err = await rejectionOf(publish({ topic: `light/${id}/sys/exe`, payload }), ApiError);
      expect({ payload, status: err.status, code: err.code }).toEqual({ payload, status: 400, code: 'validation_error' });
    }
    expect(bridge.published).toEqual([]);
    expect(registry.requests.filter((r) => r.subject === 'registry.settings.seal')).toEqual([]);
  });

  it('refuses control characters in a sys/exe line (a second line would escape the checks), but not in a secret value or on other topics', async () => {
    const id = randomDeviceId();
    registry.sealing.add(id);
    for (const payload of ['query>\nset>wifiPass=abc12345', 'query>\r\nreboot>', 'a\u0001b', 'set>volume=5\u007f']) {
      const err = await rejectionOf(publish({ topic: `light/${id}/sys/exe`, payload }), ApiError);
      expect({ payload, status: err.status, code: err.code }).toEqual({ payload, status: 400, code: 'validation_error' });
    }
    expect(bridge.published).toEqual([]);
    // Sealed, a secret value may hold them (PUT .../system/settings/{key} takes them too).
    await publish({ topic: `light/${id}/sys/exe`, payload: 'set>wifiPass=tab\there' });
    expect(Buffer.from((bridge.published[0]?.payload ?? '').slice('set>wifiPass=enc1:'.length), 'base64url').toString()).toBe(`${id}|wifiPass|tab\there`);
    // Elsewhere the payload is any text.
    for (const topic of [`light/${id}/cmd/light1`, 'custom/topic', `light/${id}/sys/other`]) await publish({ topic, payload: 'a\u0001b\nc' });
    expect(bridge.published.slice(1).map((p) => p.payload)).toEqual(['a\u0001b\nc', 'a\u0001b\nc', 'a\u0001b\nc']);
  });

  it('refuses a set> line carrying a secret pair after another one (it would go out in clear)', async () => {
    const id = randomDeviceId();
    registry.sealing.add(id);
    const err = await rejectionOf(publish({ topic: `light/${id}/sys/exe`, payload: 'set>volume=5;mqttPass=clear' }), ApiError);
    expect([err.status, err.code]).toEqual([400, 'validation_error']);
    expect(bridge.published).toEqual([]);
  });

  it('409 encryption_unavailable with nothing published when the device has no settings key, is unknown, or reported enc: false', async () => {
    const noKey = randomDeviceId();
    const oldFirmware = randomDeviceId();
    registry.sealing.add(oldFirmware);
    await saveSettings(testDb.db, oldFirmware, { enc: false, fw_ver: '0.9', file_list: [] }, new Date());
    for (const id of [noKey, oldFirmware]) {
      const err = await rejectionOf(publish({ topic: `light/${id}/sys/exe`, payload: 'set>wifiPass=hunter2' }), ApiError);
      expect([err.status, err.code]).toEqual([409, 'encryption_unavailable']);
    }
    expect(bridge.published).toEqual([]);
  });

  it('503 publish_failed when the broker does not take it', async () => {
    bridge.mode = 'refuse';
    const err = await rejectionOf(publish({ topic: 'custom/x', payload: 'x' }), ApiError);
    expect([err.status, err.code]).toEqual([503, 'publish_failed']);
  });
});

describe('raw read', () => {
  it('first call: the newest rows, newest first, both directions, with what the bridge recorded', async () => {
    const id = randomDeviceId();
    await tele(id, 'm', 5);
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/exe', payload: 'query>', direction: 'out' });
    const page = await read({ topic: `light/${id}/#`, limit: 3 });
    expect(page.rows.map((r) => [r.payload, r.direction])).toEqual([
      ['query>', 'out'],
      ['m4', 'in'],
      ['m3', 'in'],
    ]);
    expect(page.rows[1]).toEqual({ topic: `light/${id}/tele/power`, payload: 'm4', direction: 'in', received_at: expect.any(String), qos: 1, retain: false });
    expect(page.has_more).toBe(false);
    expect(page.next_cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(Date.parse(page.server_now)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('with the cursor: what arrives after, oldest first, with has_more, never skipping a row', async () => {
    const id = randomDeviceId();
    await tele(id, 'old', 3);
    const first = await read({ topic: `light/${id}/tele/+`, limit: 2 });
    expect(first.rows.map((r) => r.payload)).toEqual(['old2', 'old1']);
    let cursor = first.next_cursor;
    const empty = await read({ topic: `light/${id}/tele/+`, cursor });
    expect([empty.rows, empty.has_more]).toEqual([[], false]);
    cursor = empty.next_cursor;

    await tele(id, 'a', 5);
    const seen: string[] = [];
    const pages: boolean[] = [];
    for (let round = 0; round < 10; round += 1) {
      const page = await read({ topic: `light/${id}/tele/+`, cursor, limit: 2 });
      seen.push(...page.rows.map((r) => r.payload));
      pages.push(page.has_more);
      cursor = page.next_cursor;
      // More arrives while the partner pages.
      if (round === 0) await tele(id, 'b', 3);
      if (!page.has_more) break;
    }
    expect(seen).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'b0', 'b1', 'b2']);
    expect(pages).toEqual([true, true, true, false]);
    // Other devices' traffic in between changes nothing.
    await tele(randomDeviceId(), 'x', 2);
    await tele(id, 'c', 1);
    const last = await read({ topic: `light/${id}/tele/+`, cursor, limit: 2 });
    expect([last.rows.map((r) => r.payload), last.has_more]).toEqual([['c0'], false]);
  });

  it('since: rows received at or after it, oldest first', async () => {
    const id = randomDeviceId();
    await captured(js, stream.prefix, { deviceId: id, levels: 'tele/power', payload: 'before', receivedAt: new Date(Date.now() - 3000) });
    const since = new Date(Date.now() - 1000);
    await captured(js, stream.prefix, { deviceId: id, levels: 'tele/power', payload: 'at', receivedAt: since });
    await tele(id, 'after', 2);
    const page = await read({ topic: `light/${id}/#`, since: since.toISOString(), limit: 2 });
    expect(page.rows.map((r) => r.payload)).toEqual(['at', 'after0']);
    expect(page.has_more).toBe(true);
    const next = await read({ topic: `light/${id}/#`, cursor: page.next_cursor });
    expect([next.rows.map((r) => r.payload), next.has_more]).toEqual([['after1'], false]);
    const future = await read({ topic: `light/${id}/#`, since: new Date(Date.now() + 60_000).toISOString() });
    expect([future.rows, future.has_more]).toEqual([[], false]);
  });

  it('since: takes epoch seconds as well as ISO 8601 (no offset means UTC), and refuses anything else', async () => {
    const id = randomDeviceId();
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 2000);
    await captured(js, stream.prefix, { deviceId: id, levels: 'tele/power', payload: 'before', receivedAt: new Date(at.getTime() - 3000) });
    await captured(js, stream.prefix, { deviceId: id, levels: 'tele/power', payload: 'at', receivedAt: at });
    for (const since of [String(at.getTime() / 1000), at.toISOString().replace('Z', ''), at.toISOString().replace('Z', '+00:00')]) {
      const page = await read({ topic: `light/${id}/#`, since });
      expect({ since, rows: page.rows.map((r) => r.payload) }).toEqual({ since, rows: ['at'] });
    }
    for (const since of ['yesterday', '2026-02-30T00:00:00Z', '-5', '253402300800']) {
      const err = await rejectionOf(readRaw(deps, { request_id: uniqueId('r'), params: {}, query: { topic: `light/${id}/#`, since }, principal: GLOBAL } as RequestOf<'system.mqtt.read'>, context()), ApiError);
      expect({ since, status: err.status, code: err.code }).toEqual({ since, status: 400, code: 'validation_error' });
    }
  });

  it('matches the filter exactly: + and #, # matching its parent, levels holding dots', async () => {
    const id = randomDeviceId();
    await capture(`light/${id}/tele/a.b`, 'dotted');
    await capture(`light/${id}/tele/a_b`, 'underscored');
    await capture(`light/${id}/sys`, 'parent');
    await capture(`light/${id}/sys/resp`, 'child');
    await capture(`light/${id}/status`, 'online');
    const payloads = async (topic: string) => (await read({ topic })).rows.map((r) => r.payload);
    expect(await payloads(`light/${id}/tele/a.b`)).toEqual(['dotted']);
    expect(await payloads(`light/${id}/tele/a_b`)).toEqual(['underscored']);
    expect(await payloads(`light/${id}/sys/#`)).toEqual(['child', 'parent']);
    expect(await payloads(`light/${id}/+`)).toEqual(['online', 'parent']);
    expect(await payloads(`+/${id}/status`)).toEqual(['online']);
    expect((await payloads('light/+/status')).includes('online')).toBe(true);
    expect((await read({ topic: '#', limit: 1 })).rows.map((r) => r.topic)).toEqual([`light/${id}/status`]);
  });

  it('a filter no captured topic can match reads nothing, with a cursor to follow', async () => {
    const page = await read({ topic: 'custom/topic/#' });
    expect([page.rows, page.has_more]).toEqual([[], false]);
    const next = await read({ topic: 'custom/topic/#', cursor: page.next_cursor });
    expect(next.rows).toEqual([]);
  });

  it('finds the newest rows far back and across both directions, a window at a time', async () => {
    const id = randomDeviceId();
    const busy = randomDeviceId();
    for (let i = 0; i < 6; i += 1) {
      await captured(js, stream.prefix, { deviceId: id, levels: 'sys/exe', payload: `out${i}`, direction: 'out' });
      await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: `in${i}` });
    }
    await tele(busy, 'noise', 40);
    // Tiny windows and batches: many windows, refills mid-merge.
    const small = new DeviceInHistory(bus.connection, { stream: stream.name, prefix: stream.prefix, batch: 2, firstWindow: 4 });
    const page = await read({ topic: `light/${id}/sys/#`, limit: 7 }, GLOBAL, context(), small);
    expect(page.rows.map((r) => r.payload)).toEqual(['in5', 'out5', 'in4', 'out4', 'in3', 'out3', 'in2']);
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/exe', payload: 'later', direction: 'out' });
    await tele(busy, 'noise', 5);
    const next = await read({ topic: `light/${id}/sys/#`, cursor: page.next_cursor, limit: 7 }, GLOBAL, context(), small);
    expect([next.rows.map((r) => r.payload), next.has_more]).toEqual([['later'], false]);
  });

  it('keeps an answer within the bus message size (fewer rows; a cursor continues)', async () => {
    const id = randomDeviceId();
    const big = 'x'.repeat(300 * 1024);
    const since = new Date(Date.now() - 1000);
    for (let i = 0; i < 4; i += 1) await captured(js, stream.prefix, { deviceId: id, levels: 'tele/blob', payload: `${i}${big}` });
    const newest = await read({ topic: `light/${id}/#`, limit: 10 });
    expect(newest.rows.map((r) => r.payload[0])).toEqual(['3', '2']);
    const first = await read({ topic: `light/${id}/#`, since: since.toISOString(), limit: 10 });
    expect([first.rows.map((r) => r.payload[0]), first.has_more]).toEqual([['0', '1'], true]);
    const rest = await read({ topic: `light/${id}/#`, cursor: first.next_cursor, limit: 10 });
    expect([rest.rows.map((r) => r.payload[0]), rest.has_more]).toEqual([['2', '3'], false]);
  });

  it('raw_mqtt_devices: one in-scope device subtree only; spanning filters are 400, others 403', async () => {
    const mine = randomDeviceId();
    inScope(mine);
    await tele(mine, 'mine', 1);
    expect((await read({ topic: `light/${mine}/#` }, DEVICES)).rows.map((r) => r.payload)).toEqual(['mine0']);
    for (const topic of ['#', 'light/+/status', 'light/#', `+/${mine}/status`]) {
      const err = await rejectionOf(read({ topic }, DEVICES), ApiError);
      expect([topic, err.status, err.code]).toEqual([topic, 400, 'validation_error']);
    }
    for (const topic of [`light/${randomDeviceId()}/#`, `meter/${mine}/#`, 'custom/#', `light/${mine}`]) {
      const err = await rejectionOf(read({ topic }, DEVICES), ApiError);
      expect([topic, err.status, err.code, err.options.requiredPermission]).toEqual([topic, 403, 'forbidden', 'raw_mqtt_global']);
    }
  });

  it('refuses a cursor of another filter, and filters that are not valid', async () => {
    const id = randomDeviceId();
    const page = await read({ topic: `light/${id}/#` });
    const err = await rejectionOf(read({ topic: `light/${id}/tele/#`, cursor: page.next_cursor }), ApiError);
    expect([err.status, err.code]).toEqual([400, 'validation_error']);
    expect(err.message).toMatch(/another topic filter/);
    for (const topic of ['light/#/x', 'light/a+/x']) {
      const bad = await rejectionOf(read({ topic }), ApiError);
      expect([bad.status, bad.code]).toEqual([400, 'validation_error']);
    }
    const garbage = await rejectionOf(read({ topic: '#', cursor: 'bm90LWEtY3Vyc29y' }), ApiError);
    expect([garbage.status, garbage.code]).toEqual([400, 'validation_error']);
  });

  it('answers within the request time it has, with what it could read', async () => {
    const started = Date.now();
    const page = await read({ topic: '#', limit: 1000 }, GLOBAL, context(200));
    expect(Date.now() - started).toBeLessThan(1500);
    expect(page.next_cursor).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it('503 when the stream cannot be read', async () => {
    const gone = new DeviceInHistory(bus.connection, { stream: `${stream.name}_MISSING`, prefix: stream.prefix });
    const err = await rejectionOf(read({ topic: '#' }, GLOBAL, context(), gone), ApiError);
    expect([err.status, err.code]).toEqual([503, 'service_unavailable']);
  });
});
