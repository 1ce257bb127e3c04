/**
 * Verbs, settings writes, the response feed and file pushes on real NATS, JetStream and
 * Postgres, with stand-ins for the bridge (`bridge.message.publish`) and the registry
 * (connectivity, sealing) under a subject prefix of this file's own, called through the same
 * clients the service uses. Device traffic is put into a DEVICE_IN stream of the file's own
 * and read by the same consumer the service runs.
 */
import type { JetStreamClient } from 'nats';
import { ApiError, type Bus, type HandlerContext } from '@fleet/service-kit';
import { BridgeStandIn, principal, randomDeviceId, RegistryStandIn, rejectionOf, waitFor } from '@fleet/test-kit';
import { sendCommand, writeSetting } from '../src/handlers/commands';
import { settingText } from '../src/domain/setting-value';
import { commandRegistry } from '../src/handlers/registry';
import type { SystemDeps } from '../src/handlers/deps';
import { listResponses } from '../src/handlers/responses';
import { readDeviceSettings } from '../src/handlers/settings';
import { createTransfer, getTransfer, listTransfers } from '../src/handlers/transfers';
import { settleOverdue } from '../src/store/transfers';
import { captured, createTestDb, envelope, logger, startTestbed, type TestDb, type Testbed } from './support';

let testDb: TestDb;
let bed: Testbed;
let bus: Bus;
let js: JetStreamClient;
let stream: Testbed['stream'];
let deps: SystemDeps;
let bridge: BridgeStandIn;
let registry: RegistryStandIn;

const ctx = { logger, deadline: Date.now() + 60_000, remainingMs: () => 60_000 } as unknown as HandlerContext;
const SHA = 'ab'.repeat(32);

beforeAll(async () => {
  testDb = await createTestDb();
  const urls = { downloadUrl: async (f: { dir: string; name: string }, o?: { transferId?: string }) => `https://files.test/d/${f.dir}.${f.name}${o?.transferId ? `.${o.transferId}` : ''}`, uploadUrl: () => 'http://127.0.0.1:1/u' };
  bed = await startTestbed({ db: testDb.db, urls, env: { TRANSFER_ACK_TIMEOUT_SECONDS: '30' } });
  ({ bus, js, stream, bridge, registry, deps } = bed);
  bed.startIntake(testDb.db);
  await testDb.db.platformFile.create({ data: { dir: 'files', name: 'chime.mp3', size: 1000n, sha256: SHA, storageKey: 'files/chime.mp3' } });
  await testDb.db.platformFile.create({ data: { dir: 'firmware', name: 'fw-2.bin', size: 1000n, sha256: 'cd'.repeat(32), storageKey: 'firmware/fw-2.bin' } });
});

afterAll(async () => {
  await bed?.close();
  await testDb?.drop();
});

beforeEach(() => bridge.reset());

const command = (deviceId: string, body: Record<string, unknown>, product: 'light' | 'meter' = 'light') => sendCommand(deps, envelope(deviceId, { body }, product) as never, ctx);

describe('system commands', () => {
  it('builds each control verb’s line and publishes it on sys/exe, answering exactly what was published', async () => {
    const id = randomDeviceId();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ command: 'query' }, 'query>'],
      [{ command: 'reboot' }, 'reboot>'],
      [{ command: 'rmfile', params: { name: 'old.mp3' } }, 'rmfile>name=old.mp3'],
      [{ command: 'addfile', params: { name: 'chime.mp3', dest: 'door.mp3' } }, `addfile>name=door.mp3;sha256=${SHA};url=https://files.test/d/files.chime.mp3`],
      [{ command: 'setcert', params: { name: 'chime.mp3' } }, `setcert>name=chime.mp3;sha256=${SHA};url=https://files.test/d/files.chime.mp3`],
      [{ command: 'set', params: { key: 'volume', value: 7 } }, 'set>volume=7'],
    ];
    for (const [body, line] of cases) {
      const res = await command(id, body);
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ topic: `light/${id}/sys/exe`, payload: line, command: body.command });
    }
    expect(bridge.published.map((p) => [p.payload, p.qos])).toEqual(cases.map(([, line]) => [line, 2]));
    const report = await command(id, { command: 'report' }, 'meter');
    expect(report.body).toMatchObject({ topic: `meter/${id}/sys/exe`, payload: 'report>' });
  });

  it('needs confirm equal to the device id for destructive verbs and identity settings, sending nothing otherwise', async () => {
    const id = randomDeviceId();
    for (const body of [{ command: 'factory_reset' }, { command: 'clearsettings', confirm: 'ABCDEF012345' }, { command: 'ota_update', params: { name: 'fw-2.bin' } }, { command: 'set', params: { key: 'host', value: 'b.example' } }]) {
      const err = await rejectionOf(command(id, body), ApiError);
      expect([err.status, err.code]).toEqual([409, 'confirmation_required']);
    }
    expect(bridge.published).toEqual([]);
    const ota = await command(id, { command: 'ota_update', params: { name: 'fw-2.bin' }, confirm: id });
    expect(ota.body).toMatchObject({ payload: `ota_update>name=fw-2.bin;sha256=${'cd'.repeat(32)};url=https://files.test/d/firmware.fw-2.bin` });
  });

  it('refuses what the registry does not hold: 400 with nothing sent', async () => {
    const id = randomDeviceId();
    for (const body of [
      { command: 'launch' },
      { command: 'sample' },
      { command: 'report' },
      { command: 'query', params: { x: 1 } },
      { command: 'addfile', params: { name: 'absent.mp3' } },
      { command: 'addfile', params: { name: 'chime.mp3', dest: 'a;b' } },
      { command: 'ota_update', params: { name: 'chime.mp3' }, confirm: id },
      { command: 'set', params: { key: 'volume', value: 300 } },
      { command: 'set', params: { key: 'nosuch', value: 1 } },
    ]) {
      const err = await rejectionOf(command(id, body), ApiError);
      expect({ body, status: err.status }).toEqual({ body, status: 400 });
    }
    expect(bridge.published).toEqual([]);
  });

  it('answers publish_failed when the broker did not take the line', async () => {
    bridge.mode = 'refuse';
    const err = await rejectionOf(command(randomDeviceId(), { command: 'query' }), ApiError);
    expect([err.status, err.code]).toEqual([503, 'publish_failed']);
  });
});

describe('secret settings', () => {
  const put = (id: string, key: string, value: unknown, confirm?: string) => writeSetting(deps, envelope(id, { params: { key }, body: { value, ...(confirm ? { confirm } : {}) } }) as never, ctx);

  it('seals a secret value with the registry and never publishes it in clear', async () => {
    const id = randomDeviceId();
    registry.sealing.add(id);
    const res = await put(id, 'wifiPass', 'pa;ss word!');
    const sealed = `enc1:${Buffer.from(`${id}|wifiPass|pa;ss word!`).toString('base64url')}`;
    expect(res.body).toMatchObject({ key: 'wifiPass', payload: `set>wifiPass=${sealed}`, command: 'set' });
    expect(bridge.published.map((p) => p.payload)).toEqual([`set>wifiPass=${sealed}`]);
  });

  it('is encryption_unavailable with nothing published when the registry has no key or the device reported enc: false', async () => {
    const keyless = randomDeviceId();
    expect((await rejectionOf(put(keyless, 'wifiPass', 'abcdefgh1'), ApiError)).code).toBe('encryption_unavailable');
    const old = randomDeviceId();
    registry.sealing.add(old);
    await captured(js, stream.prefix, { deviceId: old, levels: 'sys/settings', payload: { fw_ver: '1.0', file_list: [], enc: false } });
    await waitFor(async () => (await testDb.db.settingsSnapshot.findUnique({ where: { deviceId: old } })) !== null);
    expect((await rejectionOf(put(old, 'mqttPass', 'abc', old), ApiError)).code).toBe('encryption_unavailable');
    expect(bridge.published).toEqual([]);
  });
});

describe('settings lengths', () => {
  const put = (key: string, value: unknown) => writeSetting(deps, envelope(randomDeviceId(), { params: { key }, body: { value } }) as never, ctx);

  it('counts UTF-8 bytes where the catalog says bytes (wifiSsid: 1-32 bytes), characters elsewhere', async () => {
    const tooLong = await rejectionOf(put('wifiSsid', '€'.repeat(32)), ApiError);
    expect([tooLong.status, tooLong.code, tooLong.message]).toEqual([400, 'validation_error', "invalid 'value': wifiSsid takes at most 32 bytes (UTF-8)"]);
    expect((await rejectionOf(put('wifiSsid', '€'.repeat(11)), ApiError)).status).toBe(400);
    expect((await rejectionOf(put('wifiSsid', 'a'.repeat(33)), ApiError)).message).toMatch(/at most 32 bytes/);
    expect(bridge.published).toEqual([]);
    for (const value of ['a'.repeat(32), '€'.repeat(10), `${'€'.repeat(10)}ab`]) {
      const res = await put('wifiSsid', value);
      expect({ value, status: res.status }).toEqual({ value, status: 202 });
    }
    expect(bridge.published.map((p) => p.payload)).toEqual(['a'.repeat(32), '€'.repeat(10), `${'€'.repeat(10)}ab`].map((v) => `set>wifiSsid=${v}`));
    // Every other key with a length counts characters, as its description says.
    expect(settingText('mqttUser', 'é'.repeat(64))).toBe('é'.repeat(64));
    expect(() => settingText('mqttUser', 'é'.repeat(65))).toThrow('at most 64 characters');
  });

  it('says in the catalog what each length counts', async () => {
    const res = await commandRegistry(envelope(randomDeviceId()) as never);
    const settings = (res.body as { settings: Array<Record<string, unknown>> }).settings;
    const byKey = new Map(settings.map((s) => [s.key, s]));
    expect(byKey.get('wifiSsid')).toMatchObject({ min_length: 1, max_length: 32, length_unit: 'bytes', description: expect.stringContaining('bytes') });
    expect(byKey.get('wifiPass')).toMatchObject({ min_length: 8, max_length: 63, length_unit: 'characters' });
    expect(byKey.get('volume')).not.toHaveProperty('length_unit');
    for (const s of settings) {
      if (String(s.description).includes('bytes')) expect({ key: s.key, unit: s.length_unit }).toEqual({ key: s.key, unit: 'bytes' });
    }
  });
});

describe('what devices report', () => {
  const list = async (id: string, query: Record<string, unknown> = {}) => (await listResponses(deps, envelope(id, { query }) as never)).body as { rows: Array<Record<string, unknown>>; has_more: boolean; next_cursor: string; server_now: string };

  it('keeps the last settings a device reported, masked values as sent', async () => {
    const id = randomDeviceId();
    // Nothing reported yet: an empty cache, not a missing device.
    expect((await readDeviceSettings(deps, envelope(id) as never)).body).toEqual({ device_id: id, settings: {}, fw_ver: null, file_list: [], received_at: null });
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/settings', payload: { fw_ver: '2.1', file_list: [{ name: 'a.mp3', size: 3 }], wifiPass: '*****', volume: 4 }, receivedAt: new Date(Date.now() - 1000) });
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/settings', payload: { fw_ver: '2.0' }, receivedAt: new Date(Date.now() - 5000) });
    const res = await waitFor(async () => {
      const answer = await readDeviceSettings(deps, envelope(id) as never);
      return (answer.body as { received_at: string | null }).received_at !== null ? answer : undefined;
    });
    await waitFor(async () => (await consumer_pending()) === 0);
    const again = await readDeviceSettings(deps, envelope(id) as never);
    expect(res.status).toBe(200);
    expect(again.body).toMatchObject({ fw_ver: '2.1', file_list: [{ name: 'a.mp3', size: 3 }], settings: { wifiPass: '*****', volume: 4 } });
  });

  it('drops NUL characters from reported settings but keeps a value that only spells \\u0000', async () => {
    const id = randomDeviceId();
    // The path holds a backslash followed by u0000 (JSON text "C:\\u0000dir"), the label a NUL character.
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/settings', payload: { fw_ver: '3.0', path: 'C:\\u0000dir', ['la\u0000bel']: 'a\u0000b' } });
    const res = await waitFor(async () => {
      const answer = await readDeviceSettings(deps, envelope(id) as never);
      return (answer.body as { received_at: string | null }).received_at !== null ? answer : undefined;
    });
    expect(res.body).toMatchObject({ fw_ver: '3.0', settings: { path: 'C:\\u0000dir', label: 'ab' } });
  });

  it('lists acknowledgements and log lines oldest first, the last ten minutes by default, and pages by cursor without skipping', async () => {
    const id = randomDeviceId();
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: 'query>ok', receivedAt: new Date(Date.now() - 20 * 60_000) });
    const lines = ['set>volume=5>ok', 'log>rebooting', 'addfile>name=a.mp3;sha256=00;url=u>failed:sha256 mismatch', 'weird line', 'set>volume=6>ok\r\n'];
    for (const line of lines) await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: line });
    await waitFor(async () => (await list(id)).rows.length === 5);
    const page = await list(id);
    expect(page.rows.map((r) => r.line)).toEqual(lines);
    expect(page.rows[0]).toMatchObject({ kind: 'ack', command: 'set>volume=5', result: 'ok' });
    expect(page.rows[1]).toMatchObject({ kind: 'log', text: 'rebooting' });
    expect(page.rows[2]).toMatchObject({ kind: 'ack', result: 'failed', reason: 'sha256 mismatch' });
    expect(page.rows[3]).toMatchObject({ kind: 'other' });
    // A line ended the println way is the same acknowledgement; the feed keeps it as sent.
    expect(page.rows[4]).toMatchObject({ kind: 'ack', command: 'set>volume=6', result: 'ok' });
    const older = await list(id, { since: new Date(Date.now() - 3_600_000).toISOString() });
    expect(older.rows[0]).toMatchObject({ line: 'query>ok' });

    const seen: string[] = [];
    let cursor = (await list(id, { limit: 2 })).next_cursor;
    const more = Array.from({ length: 30 }, (_, i) => `log>line ${i}`);
    const writing = Promise.all(more.map((line) => captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: line })));
    await waitFor(async () => {
      const next = await list(id, { cursor, limit: 2 });
      seen.push(...next.rows.map((r) => String(r.line)));
      cursor = next.next_cursor;
      return seen.filter((l) => l.startsWith('log>line')).length >= 30;
    });
    await writing;
    expect(seen.filter((l) => l.startsWith('log>line')).sort()).toEqual([...more].sort());
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('takes since as epoch seconds or ISO 8601 (no offset means UTC), and refuses anything else with 400', async () => {
    const id = randomDeviceId();
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 30 * 60_000);
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: 'log>older', receivedAt: new Date(at.getTime() - 60_000) });
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: 'log>at', receivedAt: at });
    await waitFor(async () => (await list(id, { since: new Date(at.getTime() - 120_000).toISOString() })).rows.length === 2);
    for (const since of [String(at.getTime() / 1000), at.getTime() / 1000, at.toISOString(), at.toISOString().replace('Z', ''), at.toISOString().replace('.000Z', '+00:00')]) {
      expect({ since, rows: (await list(id, { since })).rows.map((r) => r.line) }).toEqual({ since, rows: ['log>at'] });
    }
    for (const since of ['yesterday', '2026-13-01T00:00:00Z', '1e9', '', '99999999999999']) {
      const err = await rejectionOf(listResponses(deps, envelope(id, { query: { since } }) as never), ApiError);
      expect({ since, status: err.status, code: err.code }).toEqual({ since, status: 400, code: 'validation_error' });
    }
  });

  it('never bookmarks past a row that commits while an empty page is read', async () => {
    const id = randomDeviceId();
    const late = async () => {
      await testDb.db.responseRow.create({ data: { deviceId: id, kind: 'log', line: 'log>late', receivedAt: new Date(), msgId: `late-${id}` } });
    };
    // The row commits right after the page's read, before the answer is made.
    const racing = {
      ...deps,
      db: new Proxy(testDb.db, {
        get: (db, name) =>
          name === 'responseRow'
            ? new Proxy(db.responseRow, { get: (rows, op) => (op === 'findMany' ? async (args: never) => { const page = await rows.findMany(args); await late(); return page; } : Reflect.get(rows, op)) })
            : Reflect.get(db, name),
      }),
    } as SystemDeps;
    const empty = (await listResponses(racing, envelope(id, { query: {} }) as never)).body as { rows: unknown[]; next_cursor: string };
    expect(empty.rows).toEqual([]);
    expect((await list(id, { cursor: empty.next_cursor })).rows.map((r) => r.line)).toEqual(['log>late']);
  });

  it('refuses a cursor it did not make', async () => {
    expect((await rejectionOf(listResponses(deps, envelope(randomDeviceId(), { query: { cursor: 'bm90LWEtY3Vyc29y' } }) as never), ApiError)).status).toBe(400);
  });
});

describe('file push', () => {
  const push = (id: string, body: Record<string, unknown>, key?: string, partner = 'p1') =>
    createTransfer(deps, envelope(id, { body, principal: principal({ partner_id: partner }), ...(key ? { idempotency_key: key } : {}) }) as never, ctx);
  const read = async (id: string, transferId: string) => (await getTransfer(deps, envelope(id, { params: { transfer_id: transferId } }) as never)).body as Record<string, unknown>;

  it('sends addfile with xfer, settles on the device’s acknowledgement, and keeps the timeline', async () => {
    const id = randomDeviceId();
    registry.connectivity.set(id, { status: 'connected', status_changed_at: new Date().toISOString(), last_seen_at: new Date().toISOString() });
    const res = await push(id, { name: 'chime.mp3' });
    expect(res.status).toBe(202);
    const t = res.body as Record<string, unknown>;
    expect(t).toMatchObject({ state: 'sent', terminal: false, src: 'files/chime.mp3', dest: 'chime.mp3', sha256: SHA, corr_mode: 'envelope', attempts: 1, device_online: true, detail: null, note: expect.any(String) });
    const line = bridge.published[0]?.payload as string;
    expect(line).toBe(`addfile>name=chime.mp3;sha256=${SHA};url=https://files.test/d/files.chime.mp3;xfer=${String(t.transfer_id)}`);
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: `${line}>ok` });
    const done = await waitFor(async () => {
      const now = await read(id, String(t.transfer_id));
      return now.terminal ? now : undefined;
    });
    expect(done).toMatchObject({ state: 'succeeded', poll_after_s: null, timeline: { settled_at: expect.any(String), ack_deadline: expect.any(String) } });
    expect(done.note).toBeUndefined();
  });

  it('fails with the device’s reason, times out past the deadline, and lists newest first', async () => {
    const id = randomDeviceId();
    const a = (await push(id, { name: 'chime.mp3', dest: 'a.mp3' })).body as Record<string, unknown>;
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: `${bridge.published[0]?.payload as string}>failed:sha256 mismatch` });
    await waitFor(async () => (await read(id, String(a.transfer_id))).state === 'failed');
    const failed = await read(id, String(a.transfer_id));
    expect(failed).toMatchObject({ detail: expect.stringContaining('sha256 mismatch') });
    expect('device_online' in failed).toBe(false);
    const b = (await push(id, { name: 'chime.mp3', dest: 'b.mp3' })).body as Record<string, unknown>;
    await settleOverdue(testDb.db, new Date(Date.now() + 31_000), new Date(0));
    expect(await read(id, String(b.transfer_id))).toMatchObject({ state: 'timed_out', terminal: true });
    const listed = (await listTransfers(deps, envelope(id, { query: {} }) as never)).body as { transfers: Array<Record<string, unknown>> };
    expect(listed.transfers.map((x) => x.transfer_id)).toEqual([b.transfer_id, a.transfer_id]);
    const failedOnly = (await listTransfers(deps, envelope(id, { query: { state: 'failed' } }) as never)).body as { transfers: unknown[] };
    expect(failedOnly.transfers).toHaveLength(1);
  });

  it('matches by the command line when the transfer id travels in the URL (url_token)', async () => {
    const id = randomDeviceId();
    const tokenDeps = { ...deps, config: { ...deps.config, TRANSFER_CORR_MODE: 'url_token' as const } };
    const res = await createTransfer(tokenDeps, envelope(id, { body: { name: 'chime.mp3' }, principal: principal() }) as never, ctx);
    const t = res.body as Record<string, unknown>;
    const line = bridge.published[0]?.payload as string;
    expect(line).not.toContain('xfer=');
    expect(line).toContain(String(t.transfer_id));
    await captured(js, stream.prefix, { deviceId: id, levels: 'sys/resp', payload: `${line}>ok` });
    await waitFor(async () => (await read(id, String(t.transfer_id))).state === 'succeeded');
  });

  it('is final 400 with nothing published for a name that is not an .mp3 in files/', async () => {
    for (const body of [{ name: 'fw-2.bin' }, { name: 'absent.mp3' }, { name: 'chime.mp3', dest: 'x/y' }]) {
      expect((await rejectionOf(push(randomDeviceId(), body), ApiError)).status).toBe(400);
    }
    expect(bridge.published).toEqual([]);
  });

  it('is final 400 with nothing published for a dest that is not an .mp3 name (spec rule 9 holds for the name on the device too)', async () => {
    const id = randomDeviceId();
    for (const dest of ['other.wav', 'chime', 'chime.mp3.txt', 'cert.pem']) {
      const err = await rejectionOf(push(id, { name: 'chime.mp3', dest }), ApiError);
      expect({ dest, status: err.status, code: err.code }).toEqual({ dest, status: 400, code: 'validation_error' });
    }
    expect(bridge.published).toEqual([]);
    expect(await testDb.db.fileTransfer.count({ where: { deviceId: id } })).toBe(0);
    const upper = await push(id, { name: 'chime.mp3', dest: 'DOOR.MP3' });
    expect(upper.body).toMatchObject({ dest: 'DOOR.MP3' });
  });

  it('lists transfers since epoch seconds or ISO 8601, and refuses a since it cannot read', async () => {
    const id = randomDeviceId();
    const t = (await push(id, { name: 'chime.mp3' })).body as Record<string, unknown>;
    const created = Date.parse(String((t.timeline as Record<string, unknown>).created_at));
    const listed = async (since: string) => ((await listTransfers(deps, envelope(id, { query: { since } }) as never)).body as { transfers: Array<Record<string, unknown>> }).transfers.map((x) => x.transfer_id);
    expect(await listed(String(Math.floor(created / 1000) - 1))).toEqual([t.transfer_id]);
    expect(await listed(String(Math.floor(created / 1000) + 60))).toEqual([]);
    expect(await listed(new Date(created - 1000).toISOString())).toEqual([t.transfer_id]);
    const err = await rejectionOf(listTransfers(deps, envelope(id, { query: { since: 'soon' } }) as never), ApiError);
    expect([err.status, err.code]).toEqual([400, 'validation_error']);
  });

  it('remembers an Idempotency-Key as long as the transfer: 200 with its state, 422 for another request', async () => {
    const id = randomDeviceId();
    const first = await push(id, { name: 'chime.mp3' }, 'k-1');
    const again = await push(id, { name: 'chime.mp3' }, 'k-1');
    expect(again.status).toBe(200);
    // Nothing new was sent: the gateway gives back the device command it spent.
    expect([first.unspent, again.unspent]).toEqual([undefined, true]);
    expect((again.body as Record<string, unknown>).transfer_id).toBe((first.body as Record<string, unknown>).transfer_id);
    expect(bridge.published).toHaveLength(1);
    expect((await rejectionOf(push(id, { name: 'chime.mp3', dest: 'other.mp3' }, 'k-1'), ApiError)).code).toBe('idempotency_key_reused');
    expect((await push(id, { name: 'chime.mp3' }, 'k-1', 'p2')).status).toBe(202);
  });

  it('keeps no transfer when the broker did not take the line', async () => {
    const id = randomDeviceId();
    bridge.mode = 'refuse';
    expect((await rejectionOf(push(id, { name: 'chime.mp3' }), ApiError)).code).toBe('publish_failed');
    expect(await testDb.db.fileTransfer.count({ where: { deviceId: id } })).toBe(0);
  });
});

async function consumer_pending(): Promise<number> {
  const jsm = await bus.connection.jetstreamManager();
  const info = await jsm.consumers.info(stream.name, 'sys');
  return info.num_pending + info.num_ack_pending;
}
