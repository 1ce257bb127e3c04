import { ApiError, Bus, createLogger, NotFoundError, ServiceUnavailableError } from '@fleet/service-kit';
import type { Principal } from '@fleet/contracts';
import { randomDeviceId, RegistryStandIn, startPrivateNats, uniqueId, type PrivateNats, rejectionOf } from '@fleet/test-kit';
import { RegistryClient } from '../src';

const logger = createLogger('registry-client-test', 'silent');
let nats: PrivateNats;
let bus: Bus;
let registry: RegistryStandIn;
let client: RegistryClient;
const call = () => ({ requestId: uniqueId('req') });
const principal: Principal = { partner_id: 'p1', name: 'Partner', key_prefix: 'k_1', permissions: [], org_grants: [1], allowed_channels: ['light1'], limits: { requests_per_min: 60, device_commands_per_min: 10 } };

beforeAll(async () => {
  nats = await startPrivateNats();
  bus = await Bus.connect({ servers: nats.url, service: 'registry-client-test', logger, requestTimeoutMs: 3000 });
  registry = new RegistryStandIn(bus.connection);
  client = new RegistryClient(bus, { timeoutMs: 300, logger });
});

afterAll(async () => {
  registry?.close();
  await bus?.drain();
  await nats?.stop();
});

beforeEach(() => registry.reset());

const refusal = (work: Promise<unknown>): Promise<ApiError> => rejectionOf(work, ApiError);

describe('RegistryClient', () => {
  it('describes known devices in id order, leaving unknown ones out, asking in chunks of 1000', async () => {
    const ids = Array.from({ length: 1203 }, () => randomDeviceId());
    for (const id of ids.slice(0, 1200)) {
      registry.described.set(id, { device_id: id, product: 'light', name: null, org_node: { id: 1, parent_id: null, name: 'Root' }, automation_enabled: true });
    }
    const found = await client.lookupDevices(call(), [...ids, ids[0]!]);
    expect(found.map((d) => d.device_id)).toEqual(ids.slice(0, 1200).sort());
    expect(registry.requests.map((r) => (r.envelope.body as { device_ids: string[] }).device_ids.length)).toEqual([1000, 203]);
  });

  it('reads a device connectivity; an unknown device is 404', async () => {
    const id = randomDeviceId();
    const link = { status: 'connected' as const, status_changed_at: new Date().toISOString(), last_seen_at: null };
    registry.connectivity.set(id, link);
    expect(await client.connectivity(call(), id)).toEqual(link);
    expect(registry.requests.map((r) => [r.subject, r.envelope.body])).toEqual([['registry.device.connectivity', { device_id: id }]]);
    expect(await refusal(client.connectivity(call(), randomDeviceId()))).toMatchObject({ status: 404, code: 'not_found' });
  });

  it('seals a setting, and passes the registry 409 encryption_unavailable through', async () => {
    const id = randomDeviceId();
    registry.sealing.add(id);
    expect(await client.sealSetting(call(), id, 'wifiPass', 'secret')).toMatch(/^enc1:/);
    const other = randomDeviceId();
    expect(await refusal(client.sealSetting(call(), other, 'wifiPass', 'secret'))).toMatchObject({ status: 409, code: 'encryption_unavailable' });
  });

  it('resolves a device in scope with the principal; anything else is the same 404', async () => {
    const id = randomDeviceId();
    registry.devices.set(id, { device_id: id, product: 'light', org_node_id: 1, name: 'Desk' });
    expect(await client.resolveScope(call(), principal, id)).toMatchObject({ device_id: id });
    expect(registry.requests[0]?.envelope).toMatchObject({ principal, params: { device_id: id } });
    const missing = await refusal(client.resolveScope(call(), principal, randomDeviceId()));
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing.message).toBe('Device not found.');
  });

  it('answers 503 service_unavailable when the registry fails, hangs, or the deadline has passed', async () => {
    const id = randomDeviceId();
    registry.connectivity.set(id, { status: 'connected', status_changed_at: null, last_seen_at: null });
    for (const mode of ['refuse', 'silent'] as const) {
      registry.mode = mode;
      const started = Date.now();
      expect(await refusal(client.connectivity(call(), id))).toBeInstanceOf(ServiceUnavailableError);
      expect(Date.now() - started).toBeLessThan(2000);
    }
    registry.mode = 'ok';
    expect(await refusal(client.connectivity({ requestId: 'late', deadline: Date.now() - 1 }, id))).toMatchObject({ status: 503, code: 'service_unavailable' });
    expect(registry.requests).toEqual([]);
  });
});
