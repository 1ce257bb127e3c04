import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { OwnFleet } from './support/own-fleet';

/**
 * Provisioning and reads while the broker or device-registry does not answer: 503 within a
 * bounded time, nothing kept, and an Idempotency-Key held while its first request runs. The
 * broker and the registry are paused (SIGSTOP), so these run on a fleet of their own: the
 * shared end-to-end fleet's other suites must never see its broker or registry stop.
 */

const ROOT_SECRET = 'Sim-Root-Secret!';
const provisionBody = { credential_format: 'derived-v1' };

let fleet: OwnFleet;
let key: string;

beforeAll(async () => {
  fleet = await OwnFleet.start({ services: ['device-registry', 'mqtt-bridge', 'gateway'] });
  ({ key } = await fleet.partnerWithKey(['--permissions', 'device_provisioning,device_removal,health_read', '--access-all-devices']));
}, 60_000);

afterAll(async () => {
  await fleet?.destroy();
}, 60_000);

/** Runs `work` with the process paused, resuming it however `work` ends. */
async function whilePaused<T>(pid: number | null, work: () => Promise<T>): Promise<T> {
  if (!pid) throw new Error('the process to pause is not running');
  process.kill(pid, 'SIGSTOP');
  try {
    return await work();
  } finally {
    process.kill(pid, 'SIGCONT');
  }
}

it('answers 503 and keeps nothing when the broker is down during provisioning', async () => {
  const id = randomDeviceId();
  const provision = () => fleet.api('POST', `/v1/devices/${id}`, { key, body: { ...provisionBody, credential_source: 'root_secret', root_secret: ROOT_SECRET } });
  const res = await whilePaused(fleet.handle.mqttPid, provision);
  expect(res.status).toBe(503);
  expect((await fleet.api('GET', `/v1/devices/${id}`, { key })).status).toBe(404);
  // Nothing was kept: the same id provisions normally once the broker is back.
  const retried = await waitFor(async () => {
    const again = await provision();
    return again.status === 201 ? again : undefined;
  }, { timeoutMs: 15_000, intervalMs: 500, what: 'provisioning after the outage' });
  expect(retried.body.device_id).toBe(id);
});

it('answers 503 within a bounded time when the registry does not answer', async () => {
  const started = Date.now();
  const res = await whilePaused(fleet.handle.pidOf('device-registry'), () => fleet.api('GET', '/v1/devices', { key }));
  expect([res.status, res.body.code]).toEqual([503, 'service_unavailable']);
  expect(res.headers.get('retry-after')).toBeTruthy();
  expect(Date.now() - started).toBeLessThan(5000);
});

it('answers 409 idempotency_in_progress with Retry-After while the first request runs', async () => {
  const headers = { 'Idempotency-Key': `k-${randomDeviceId()}` };
  const id = randomDeviceId();
  const send = () => fleet.api('POST', `/v1/devices/${id}`, { key, body: provisionBody, headers });
  let first: ReturnType<typeof send> | undefined;
  // The registry is held so the first request is still running when the repeat arrives.
  const repeat = await whilePaused(fleet.handle.pidOf('device-registry'), async () => {
    first = send();
    await new Promise((r) => setTimeout(r, 300));
    return send();
  });
  expect([repeat.status, repeat.body.code]).toEqual([409, 'idempotency_in_progress']);
  expect(Number(repeat.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  await first;
});
