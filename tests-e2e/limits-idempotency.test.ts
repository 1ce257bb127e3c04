import { randomDeviceId } from '@fleet/test-kit';
import { api, partnerWithKey } from './support/api';

// The gateway's limit classes and idempotency rules through real routes of the running fleet.

const provisionBody = { credential_format: 'derived-v1' };

async function provisioned(key: string): Promise<string> {
  const id = randomDeviceId();
  const res = await api('POST', `/v1/devices/${id}`, { key, body: provisionBody });
  expect(res.status).toBe(201);
  return id;
}

describe('idempotency on provisioning', () => {
  let key: string;
  beforeAll(async () => {
    key = (await partnerWithKey(['--permissions', 'device_provisioning', '--access-all-devices'])).key;
  });

  it('answers 422 when the key comes back with a different request', async () => {
    const headers = { 'Idempotency-Key': `k-${randomDeviceId()}` };
    const id = randomDeviceId();
    expect((await api('POST', `/v1/devices/${id}`, { key, body: provisionBody, headers })).status).toBe(201);
    const other = await api('POST', `/v1/devices/${id}`, { key, body: { ...provisionBody, name: 'changed' }, headers });
    expect([other.status, other.body.code]).toEqual([422, 'idempotency_key_reused']);
  });

  it('runs a key again after a failure instead of replaying it', async () => {
    const headers = { 'Idempotency-Key': `k-${randomDeviceId()}` };
    const id = randomDeviceId();
    const bad = await api('POST', `/v1/devices/${id}`, { key, body: { credential_format: 'derived-v2' }, headers });
    expect(bad.status).toBe(400);
    const good = await api('POST', `/v1/devices/${id}`, { key, body: { credential_format: 'derived-v2' }, headers });
    expect(good.status).toBe(400);
    expect(good.headers.get('idempotent-replayed')).toBeNull();
  });
});

describe('limit classes', () => {
  it('throttles configuration mutations per partner (30 a minute)', async () => {
    const { key } = await partnerWithKey(['--permissions', 'device_provisioning,config_write', '--access-all-devices']);
    const id = await provisioned(key);
    const statuses: number[] = [];
    for (let i = 0; i < 31; i++) statuses.push((await api('PATCH', `/v1/devices/${id}/config`, { key, body: { name: `n${i}` } })).status);
    expect(statuses.slice(0, 30).every((s) => s === 204)).toBe(true);
    expect(statuses[30]).toBe(429);
    const refused = await api('PATCH', `/v1/devices/${id}/config`, { key, body: { name: 'again' } });
    expect(refused.body.code).toBe('rate_limited');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(refused.headers.get('ratelimit-remaining'))).toBeGreaterThan(0);
  });

  it('spends removals from the hourly destructive ceiling (20), never a refused one', async () => {
    const { key } = await partnerWithKey(['--permissions', 'device_provisioning,device_removal', '--access-all-devices']);
    const ids: string[] = [];
    for (let i = 0; i < 21; i++) ids.push(await provisioned(key));
    const unconfirmed = await api('DELETE', `/v1/devices/${ids[0]}`, { key });
    expect([unconfirmed.status, unconfirmed.body.code]).toEqual([409, 'confirmation_required']);
    for (const id of ids.slice(0, 20)) expect((await api('DELETE', `/v1/devices/${id}?confirm=${id}`, { key })).status).toBe(204);
    const over = await api('DELETE', `/v1/devices/${ids[20]}?confirm=${ids[20]}`, { key });
    expect([over.status, over.body.code]).toEqual([429, 'rate_limited']);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(60);
    expect((await api('GET', `/v1/devices/${ids[20]}`, { key })).status).toBe(200);
  });
});
