import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SimulatedLight, type DeviceMessage } from '@fleet/device-sim';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { api, partnerWithKey } from './support/api';
import { e2eFleet, TRANSFER_ACK_TIMEOUT_S } from './support/fleet-env';
import { mp3, uploadPlatformFile } from './support/platform-files';

/**
 * The system interface end to end: simulated lights that answer `sys/exe` as the device
 * protocol says (acknowledgements, `sys/settings` after connect and `query>`, downloads checked
 * against their SHA-256, `log>` lines) → Mosquitto → mqtt-bridge → DEVICE_IN → system-files,
 * read back through the gateway.
 */

const SECRET = 'System-E2E-Secr3';
const lights: SimulatedLight[] = [];
let operator: Awaited<ReturnType<typeof partnerWithKey>>;
let admin: Awaited<ReturnType<typeof partnerWithKey>>;
let reader: Awaited<ReturnType<typeof partnerWithKey>>;

type Json = Record<string, unknown>;

async function provisionLight(options: Partial<ConstructorParameters<typeof SimulatedLight>[0]> = {}, credential: Json = { credential_source: 'root_secret', root_secret: SECRET }): Promise<SimulatedLight> {
  const id = randomDeviceId();
  const res = await api('POST', `/v1/devices/${id}`, { key: admin.key, body: { credential_format: 'derived-v1', product: 'light', ...credential } });
  expect(res.status).toBe(201);
  const light = new SimulatedLight({ brokerUrl: e2eFleet().mqttUrl, deviceId: id, ...(credential.root_secret ? { rootSecret: SECRET } : {}), ...options });
  light.on('error', () => undefined);
  lights.push(light);
  await light.start();
  // The registry learns of the connection from the bridge's connectivity events, a moment later.
  await waitFor(async () => (await api('GET', `/v1/devices/${id}/system/status`, { key: admin.key })).body.status === 'connected', { what: `${id} connected` });
  return light;
}

const sysExe = (m: DeviceMessage): boolean => m.sub === 'sys/exe';

/** The feed rows of a device, read through the cursor until the wanted line shows. */
async function feedLine(key: string, deviceId: string, line: string): Promise<Json> {
  return waitFor(
    async () => {
      const res = await api('GET', `/v1/devices/${deviceId}/system/responses`, { key });
      expect(res.status).toBe(200);
      return (res.body.rows as Json[]).find((r) => r.line === line);
    },
    { timeoutMs: 8000, what: `feed line ${line}` },
  );
}

beforeAll(async () => {
  const base = ['--access-all-devices'];
  operator = await partnerWithKey(['--permissions', 'system_read,system_control,file_upload,file_delete', ...base]);
  admin = await partnerWithKey(['--permissions', 'device_provisioning,system_read,system_control,system_destructive,file_upload,raw_mqtt_global', ...base]);
  reader = await partnerWithKey(['--permissions', 'system_read', ...base]);
}, 60_000);

afterAll(async () => {
  await Promise.all(lights.map((l) => l.stop().catch(() => undefined)));
});

describe('verbs, settings and what devices report', () => {
  let light: SimulatedLight;
  beforeAll(async () => {
    light = await provisionLight({ logLines: true });
  });

  it('lists the verb registry with the tiers the account holds', async () => {
    const res = await api('GET', '/v1/system/commands', { key: operator.key });
    expect(res.status).toBe(200);
    const commands = res.body.commands as Json[];
    expect(commands.find((c) => c.command === 'query')).toMatchObject({ tier: 'control', confirm_required: false, allowed: true });
    expect(commands.find((c) => c.command === 'factory_reset')).toMatchObject({ tier: 'destructive', confirm_required: true, allowed: false, required_permission: 'system_destructive' });
    expect(res.body.destructive_settings_keys).toEqual(expect.arrayContaining(['mqttUser', 'mqttPass', 'devId', 'topicRoot', 'host', 'tlsMode', 'mqttPort', 'caCertFile']));
    expect((await api('GET', '/v1/system/commands', { key: (await partnerWithKey(['--permissions', 'state_read'])).key })).body).toMatchObject({ code: 'forbidden', required_permission: 'system_read' });
  });

  it('caches the settings the device reports after connecting, masked values kept masked', async () => {
    const res = await waitFor(async () => {
      const r = await api('GET', `/v1/devices/${light.deviceId}/system/settings`, { key: reader.key });
      return r.status === 200 && r.body.received_at !== null ? r : undefined;
    });
    expect(res.body).toMatchObject({ device_id: light.deviceId, fw_ver: expect.any(String), file_list: expect.any(Array) });
    expect(res.body.settings).toEqual(light.settingsDocument());
  });

  it('sends a control verb and its acknowledgement reaches the feed; query refreshes the settings', async () => {
    const res = await api('POST', `/v1/devices/${light.deviceId}/system/commands`, { key: operator.key, body: { command: 'query' } });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ command: 'query', payload: 'query>', topic: `light/${light.deviceId}/sys/exe`, sent_at: expect.any(String) });
    const row = await feedLine(operator.key, light.deviceId, 'query>ok');
    expect(row).toMatchObject({ kind: 'ack', command: 'query>', result: 'ok' });
  });

  it('refuses a destructive verb without the tier (403) or without confirm (409), sending nothing', async () => {
    const before = light.received.filter(sysExe).length;
    const noTier = await api('POST', `/v1/devices/${light.deviceId}/system/commands`, { key: operator.key, body: { command: 'formatfs', confirm: light.deviceId } });
    expect([noTier.status, noTier.body.code, noTier.body.required_permission]).toEqual([403, 'forbidden', 'system_destructive']);
    const noConfirm = await api('POST', `/v1/devices/${light.deviceId}/system/commands`, { key: admin.key, body: { command: 'formatfs' } });
    expect([noConfirm.status, noConfirm.body.code]).toEqual([409, 'confirmation_required']);
    const wrong = await api('POST', `/v1/devices/${light.deviceId}/system/commands`, { key: admin.key, body: { command: 'formatfs', confirm: 'ABCDEFABCDEF' } });
    expect([wrong.status, wrong.body.code]).toEqual([409, 'confirmation_required']);
    const notText = await api('POST', `/v1/devices/${light.deviceId}/system/commands`, { key: admin.key, body: { command: 'formatfs', confirm: 1 } });
    expect([notText.status, notText.body.code]).toEqual([409, 'confirmation_required']);
    const sent = await api('POST', `/v1/devices/${light.deviceId}/system/commands`, { key: admin.key, body: { command: 'formatfs', confirm: light.deviceId } });
    expect([sent.status, sent.body.payload]).toEqual([202, 'formatfs>']);
    await feedLine(admin.key, light.deviceId, 'formatfs>ok');
    expect(light.received.filter(sysExe).map((m) => m.payload.toString()).slice(before)).toEqual(['formatfs>']);
  });

  it('refuses unknown verbs, parameters and the meter-only report on a light', async () => {
    for (const body of [{ command: 'selfdestruct' }, { command: 'report' }, { command: 'query', params: { now: true } }, { command: 'rmfile' }, { command: 'addfile', params: { name: 'nope.mp3' } }]) {
      const res = await api('POST', `/v1/devices/${light.deviceId}/system/commands`, { key: operator.key, body });
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: 'validation_error' });
    }
  });

  it('writes a setting from the catalog and refuses keys and values outside it', async () => {
    const res = await api('PUT', `/v1/devices/${light.deviceId}/system/settings/volume`, { key: operator.key, body: { value: 5 } });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ key: 'volume', payload: 'set>volume=5', command: 'set' });
    await feedLine(operator.key, light.deviceId, 'set>volume=5>ok');
    expect(light.pendingSettings.volume).toBe(5);
    for (const [key, value] of [['volume', 101], ['volume', 'loud'], ['colour', 'red'], ['ntpServer', 'a;b']] as const) {
      const bad = await api('PUT', `/v1/devices/${light.deviceId}/system/settings/${key}`, { key: operator.key, body: { value } });
      expect({ key, value, status: bad.status, code: bad.body.code }).toEqual({ key, value, status: 400, code: 'validation_error' });
    }
    const identity = await api('PUT', `/v1/devices/${light.deviceId}/system/settings/mqttPort`, { key: operator.key, body: { value: 8883, confirm: light.deviceId } });
    expect([identity.status, identity.body.required_permission]).toEqual([403, 'system_destructive']);
    const unconfirmed = await api('PUT', `/v1/devices/${light.deviceId}/system/settings/mqttPort`, { key: admin.key, body: { value: 8883 } });
    expect([unconfirmed.status, unconfirmed.body.code]).toEqual([409, 'confirmation_required']);
  });

  it('counts wifiSsid in UTF-8 bytes, as the catalog describes it', async () => {
    const catalog = await api('GET', '/v1/system/commands', { key: operator.key });
    expect((catalog.body.settings as Json[]).find((s) => s.key === 'wifiSsid')).toMatchObject({ max_length: 32, length_unit: 'bytes', description: expect.stringContaining('bytes') });
    const tooLong = await api('PUT', `/v1/devices/${light.deviceId}/system/settings/wifiSsid`, { key: operator.key, body: { value: '€'.repeat(32) } });
    expect([tooLong.status, tooLong.body.code]).toEqual([400, 'validation_error']);
    expect(String(tooLong.body.error)).toContain('32 bytes');
    const fits = await api('PUT', `/v1/devices/${light.deviceId}/system/settings/wifiSsid`, { key: operator.key, body: { value: '€'.repeat(10) } });
    expect(fits.status).toBe(202);
    await feedLine(operator.key, light.deviceId, `set>wifiSsid=${'€'.repeat(10)}>ok`);
  });

  it('reads the response feed since epoch seconds as well as ISO 8601, and refuses anything else', async () => {
    await feedLine(operator.key, light.deviceId, 'query>ok');
    for (const since of [String(Math.floor(Date.now() / 1000) - 3600), encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())]) {
      const res = await api('GET', `/v1/devices/${light.deviceId}/system/responses?since=${since}&limit=1000`, { key: reader.key });
      expect({ since, status: res.status }).toEqual({ since, status: 200 });
      expect((res.body.rows as Json[]).some((r) => r.line === 'query>ok')).toBe(true);
    }
    const bad = await api('GET', `/v1/devices/${light.deviceId}/system/responses?since=yesterday`, { key: reader.key });
    expect([bad.status, bad.body.code]).toEqual([400, 'validation_error']);
  });

  it('seals a secret setting for the device: it arrives as enc1: and opens with the device key, never in clear', async () => {
    const res = await api('PUT', `/v1/devices/${light.deviceId}/system/settings/wifiPass`, { key: operator.key, body: { value: 'correct horse battery' } });
    expect(res.status).toBe(202);
    const payload = String(res.body.payload);
    expect(payload).toMatch(/^set>wifiPass=enc1:[A-Za-z0-9_-]+$/);
    await feedLine(operator.key, light.deviceId, `${payload}>ok`);
    expect(light.pendingSettings.wifiPass).toBe('correct horse battery');
    expect(light.received.some((m) => m.payload.toString().includes('correct horse'))).toBe(false);
    // The same rule holds for a raw publish to sys/exe.
    const raw = await api('POST', '/v1/system/mqtt/messages', { key: admin.key, body: { topic: `light/${light.deviceId}/sys/exe`, payload: 'set>wifiPass=hunter22hunter' } });
    expect(raw.status).toBe(202);
    expect(String(raw.body.payload)).toMatch(/^set>wifiPass=enc1:/);
    await feedLine(operator.key, light.deviceId, `${String(raw.body.payload)}>ok`);
    expect(light.received.some((m) => m.payload.toString().includes('hunter22'))).toBe(false);
  });

  it('answers encryption_unavailable, sending nothing, for old firmware and for a device without a settings key', async () => {
    const old = await provisionLight({ enc: false });
    await waitFor(async () => (await api('GET', `/v1/devices/${old.deviceId}/system/settings`, { key: reader.key })).body.received_at != null);
    const refused = await api('PUT', `/v1/devices/${old.deviceId}/system/settings/wifiPass`, { key: operator.key, body: { value: 'correct horse battery' } });
    expect([refused.status, refused.body.code]).toEqual([409, 'encryption_unavailable']);
    const keyless = await provisionLight({ password: 'b'.repeat(16) + '0123456789abcdef' }, { credential_source: 'mqtt_password', mqtt_password: 'b'.repeat(16) + '0123456789abcdef' });
    const none = await api('PUT', `/v1/devices/${keyless.deviceId}/system/settings/wifiPass`, { key: operator.key, body: { value: 'correct horse battery' } });
    expect([none.status, none.body.code]).toEqual([409, 'encryption_unavailable']);
    expect([...old.received, ...keyless.received].filter(sysExe)).toEqual([]);
  });

  it('keeps log lines in the feed and a cursor never skips a row while lines keep arriving', async () => {
    const seen: string[] = [];
    // Read what the feed holds (the last ten minutes, oldest first) to the end: the cursor then follows new rows only.
    let page = await api('GET', `/v1/devices/${light.deviceId}/system/responses?limit=3`, { key: operator.key });
    while (page.body.has_more === true) page = await api('GET', `/v1/devices/${light.deviceId}/system/responses?limit=3&cursor=${String(page.body.next_cursor)}`, { key: operator.key });
    let cursor = String(page.body.next_cursor);
    const sent: string[] = [];
    const burst = (async () => {
      for (let i = 0; i < 40; i += 1) {
        const line = `set>volume=${i % 100}`;
        sent.push(`${line}>ok`);
        await api('PUT', `/v1/devices/${light.deviceId}/system/settings/volume`, { key: admin.key, body: { value: i % 100 } });
      }
    })();
    const reading = (async () => {
      for (;;) {
        const res = await api('GET', `/v1/devices/${light.deviceId}/system/responses?limit=3&cursor=${cursor}`, { key: operator.key });
        expect(res.status).toBe(200);
        for (const row of res.body.rows as Json[]) if (row.kind === 'ack') seen.push(String(row.line));
        cursor = String(res.body.next_cursor);
        if (seen.filter((l) => l.startsWith('set>volume=')).length >= 40) return;
      }
    })();
    await burst;
    await Promise.race([reading, new Promise((_, reject) => setTimeout(() => reject(new Error(`feed saw ${seen.length} of 40`)), 20_000))]);
    expect(seen.filter((l) => l.startsWith('set>volume='))).toEqual(sent);
    const logs = await api('GET', `/v1/devices/${light.deviceId}/system/responses?since=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}&limit=1000`, { key: operator.key });
    expect((logs.body.rows as Json[]).some((r) => r.kind === 'log' && typeof r.text === 'string')).toBe(true);
    expect(logs.body.server_now).toEqual(expect.any(String));
  });
});

describe('platform files and file push', () => {
  const name = `chime-${Date.now()}.mp3`;
  let light: SimulatedLight;
  beforeAll(async () => {
    light = await provisionLight({ fetchFiles: true });
  });

  it('stores an upload with its SHA-256 and audio check, never overwrites, lists and deletes', async () => {
    const bytes = mp3(100);
    const res = await uploadPlatformFile(operator.key, 'files', name, bytes);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ dir: 'files', name, size: bytes.length });
    expect(res.body.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(res.body.audio).toMatchObject({ playable: true, summary: expect.objectContaining({ channel_mode: 'mono', sample_rate_hz: 16000 }) });
    const again = await uploadPlatformFile(operator.key, 'files', name, mp3(50));
    expect([again.status, again.body.code]).toEqual([409, 'conflict']);
    // A large body whose name clashes is refused partway (the name comes first): still 409, as the
    // file server closes without resetting the gateway's relay while the body streams.
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const large = await uploadPlatformFile(operator.key, 'files', name, Buffer.alloc(24 * 1024 * 1024, 1));
      expect([large.status, large.body.code]).toEqual([409, 'conflict']);
    }
    const wav = Buffer.concat([Buffer.from('RIFF\x24\x08\x00\x00WAVEfmt ', 'latin1'), Buffer.alloc(2048)]);
    const notMp3 = await uploadPlatformFile(operator.key, 'files', `wave-${Date.now()}.mp3`, wav);
    expect([notMp3.status, notMp3.body.code]).toEqual([400, 'validation_error']);
    const listed = await api('GET', '/v1/system/files?dir=files', { key: reader.key });
    expect((listed.body.files as Json[]).find((f) => f.name === name)).toMatchObject({ size: bytes.length, sha256: res.body.sha256 });
    const gone = `gone-${Date.now()}.txt`;
    expect((await uploadPlatformFile(operator.key, 'files', gone, Buffer.from('hello'))).status).toBe(201);
    expect((await api('DELETE', `/v1/system/files?dir=files&name=${gone}`, { key: operator.key })).status).toBe(204);
    expect((await api('DELETE', `/v1/system/files?dir=files&name=${gone}`, { key: operator.key })).status).toBe(404);
  });

  it('answers the upload’s Location: the file list filtered to the new file', async () => {
    const located = `located-${Date.now()}.txt`;
    const res = await uploadPlatformFile(operator.key, 'files', located, Buffer.from('where am I'));
    expect(res.status).toBe(201);
    const location = String(res.headers.get('location'));
    expect(location).toBe(`/v1/system/files?dir=files&name=${located}`);
    const got = await api('GET', location, { key: reader.key });
    expect([got.status, got.body]).toEqual([200, { files: [res.body] }]);
    // The same URL deletes it; the list then names nothing.
    expect((await api('DELETE', location, { key: operator.key })).status).toBe(204);
    expect((await api('GET', location, { key: reader.key })).body).toEqual({ files: [] });
  });

  it('pushes a file: the device downloads it, checks its SHA-256 and the transfer succeeds', async () => {
    const res = await api('POST', `/v1/devices/${light.deviceId}/files`, { key: operator.key, body: { name }, headers: { 'Idempotency-Key': `push-${name}` } });
    expect(res.status).toBe(202);
    expect(res.headers.get('location')).toBe(`/v1/devices/${light.deviceId}/files/${String(res.body.transfer_id)}`);
    expect(res.body).toMatchObject({ state: 'sent', terminal: false, src: `files/${name}`, dest: name, device_online: true, attempts: 1 });
    const done = await waitFor(async () => {
      const t = await api('GET', String(res.headers.get('location')), { key: reader.key });
      return t.body.terminal ? t : undefined;
    });
    expect(done.body).toMatchObject({ state: 'succeeded', poll_after_s: null });
    expect(light.files.some((f) => f.name === name)).toBe(true);
    const replay = await api('POST', `/v1/devices/${light.deviceId}/files`, { key: operator.key, body: { name }, headers: { 'Idempotency-Key': `push-${name}` } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const list = await api('GET', `/v1/devices/${light.deviceId}/files?state=succeeded`, { key: reader.key });
    expect((list.body.transfers as Json[])[0]).toMatchObject({ transfer_id: res.body.transfer_id });
  });

  it('fails a push whose bytes do not match their SHA-256, with the device’s reason', async () => {
    const other = `other-${Date.now()}.mp3`;
    expect((await uploadPlatformFile(operator.key, 'files', other, mp3(20, 7))).status).toBe(201);
    // The stored bytes change behind the platform's back: the device's check catches it.
    fs.writeFileSync(path.join(e2eFleet().dataDir, 'files', 'files', other), mp3(20, 8));
    const res = await api('POST', `/v1/devices/${light.deviceId}/files`, { key: operator.key, body: { name: other, dest: 'alert.mp3' } });
    expect(res.status).toBe(202);
    const done = await waitFor(async () => {
      const t = await api('GET', `/v1/devices/${light.deviceId}/files/${String(res.body.transfer_id)}`, { key: reader.key });
      return t.body.terminal ? t : undefined;
    });
    expect(done.body).toMatchObject({ state: 'failed', detail: expect.stringContaining('sha256 mismatch') });
  });

  it('times a push out when the device never answers', async () => {
    light.misbehave({ silent: true });
    try {
      const res = await api('POST', `/v1/devices/${light.deviceId}/files`, { key: operator.key, body: { name, dest: 'late.mp3' } });
      expect(res.status).toBe(202);
      const done = await waitFor(
        async () => {
          const t = await api('GET', `/v1/devices/${light.deviceId}/files/${String(res.body.transfer_id)}`, { key: reader.key });
          return t.body.terminal ? t : undefined;
        },
        { timeoutMs: (TRANSFER_ACK_TIMEOUT_S + 5) * 1000 },
      );
      expect(done.body).toMatchObject({ state: 'timed_out', terminal: true });
    } finally {
      light.misbehave({ silent: false });
    }
  });

  it('refuses a push of a name that is not an .mp3 in files/, publishing nothing', async () => {
    const before = light.received.filter(sysExe).length;
    for (const body of [{ name: 'readme.txt' }, { name: 'missing.mp3' }, { name, dest: 'other.wav' }, { name, dest: 'other' }]) {
      const res = await api('POST', `/v1/devices/${light.deviceId}/files`, { key: operator.key, body });
      expect([res.status, res.body.code]).toEqual([400, 'validation_error']);
    }
    expect(light.received.filter(sysExe).length).toBe(before);
  });
});

describe('a removed device', () => {
  it('leaves nothing behind: the same id provisioned again has no cached settings, feed rows, transfers or status history', async () => {
    const remover = await partnerWithKey(['--permissions', 'device_removal,system_read', '--access-all-devices']);
    const light = await provisionLight({ logLines: true });
    const id = light.deviceId;
    await waitFor(async () => (await api('GET', `/v1/devices/${id}/system/settings`, { key: reader.key })).body.received_at != null, { what: 'settings reported' });
    expect((await api('POST', `/v1/devices/${id}/system/commands`, { key: operator.key, body: { command: 'query' } })).status).toBe(202);
    await feedLine(operator.key, id, 'query>ok');
    const clip = `removal-${Date.now()}.mp3`;
    expect((await uploadPlatformFile(operator.key, 'files', clip, mp3(20, 3))).status).toBe(201);
    expect((await api('POST', `/v1/devices/${id}/files`, { key: operator.key, body: { name: clip } })).status).toBe(202);
    expect(((await api('GET', `/v1/devices/${id}/files`, { key: reader.key })).body.transfers as Json[]).length).toBe(1);
    await light.stop();

    expect((await api('DELETE', `/v1/devices/${id}?confirm=${id}`, { key: remover.key })).status).toBe(204);
    const again = await api('POST', `/v1/devices/${id}`, { key: admin.key, body: { credential_format: 'derived-v1', product: 'light', credential_source: 'root_secret', root_secret: SECRET } });
    expect(again.status).toBe(201);

    // system-files hears of the removal from the registry's device events, a moment later.
    const settings = await waitFor(
      async () => {
        const res = await api('GET', `/v1/devices/${id}/system/settings`, { key: reader.key });
        return res.status === 200 && res.body.received_at === null ? res : undefined;
      },
      { timeoutMs: 10_000, what: 'the removed device’s settings forgotten' },
    );
    expect(settings.body).toEqual({ device_id: id, settings: {}, fw_ver: null, file_list: [], received_at: null });
    const feed = await api('GET', `/v1/devices/${id}/system/responses?since=${Math.floor(Date.now() / 1000) - 3600}`, { key: reader.key });
    expect([feed.status, feed.body.rows]).toEqual([200, []]);
    expect((await api('GET', `/v1/devices/${id}/files`, { key: reader.key })).body).toEqual({ transfers: [] });
    const status = await api('GET', `/v1/devices/${id}/system/status`, { key: reader.key });
    expect(status.body).toMatchObject({ status: 'disconnected', last_connection: null, snapshots: [], heartbeats: [] });
    // A secret write now depends on the new device, not on what the old one reported.
    const secret = await api('PUT', `/v1/devices/${id}/system/settings/wifiPass`, { key: operator.key, body: { value: 'correct horse battery' } });
    expect(secret.status).toBe(202);
  });
});
