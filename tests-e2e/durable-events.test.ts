import { connect } from 'nats';
import { SimulatedLight } from '@fleet/device-sim';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { OwnFleet } from './support/own-fleet';

/**
 * A service that was down when a device was removed learns of it when it comes back: the
 * registry's device events are durable (REGISTRY_EVENTS, evt.registry.device.changed.v1), and
 * light-command reads them with a durable consumer. light-command is stopped, a light with a
 * reported state is removed, light-command is started again; the id, provisioned anew, then
 * shows no state of the removed light.
 * The registry's events wait in its outbox until they are stored: an organization the staff CLI
 * creates while the registry is stopped is announced once the registry is back.
 */

const SECRET = 'Durable-Secr3t!!';
let fleet: OwnFleet;
let key: string;
let light: SimulatedLight | undefined;

beforeAll(async () => {
  fleet = await OwnFleet.start({ services: ['device-registry', 'light-command', 'mqtt-bridge', 'gateway'] });
  ({ key } = await fleet.partnerWithKey(['--permissions', 'device_provisioning,device_removal,raw_commands,state_read', '--access-all-devices']));
}, 90_000);

afterAll(async () => {
  await light?.stop().catch(() => undefined);
  await fleet?.destroy();
}, 60_000);

const provision = (deviceId: string) =>
  fleet.api('POST', `/v1/devices/${deviceId}`, { key, body: { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET } });

const stateOf = async (deviceId: string): Promise<string[]> => {
  const res = await fleet.api('GET', `/v1/devices/${deviceId}/state`, { key });
  expect(res.status).toBe(200);
  return Object.keys(res.body.state as Record<string, unknown>);
};

it('applies a removal that happened while light-command was stopped once it is back', async () => {
  const deviceId = randomDeviceId();
  expect((await provision(deviceId)).status).toBe(201);
  light = new SimulatedLight({ brokerUrl: fleet.mqttUrl, deviceId, rootSecret: SECRET });
  await light.start();
  const sent = await fleet.api('POST', `/v1/devices/${deviceId}/commands`, { key, body: { channel: 'light1', payload: 'pulse:FF0000,1200' } });
  expect(sent.status).toBe(202);
  await waitFor(async () => (await stateOf(deviceId)).includes('light1'), { timeoutMs: 10_000, what: 'the light1 state report' });
  await light.stop();
  light = undefined;

  await fleet.handle.stopService('light-command');
  expect((await fleet.api('DELETE', `/v1/devices/${deviceId}?confirm=${deviceId}`, { key })).status).toBe(204);
  expect((await provision(deviceId)).status).toBe(201);
  await fleet.handle.startService('light-command');

  // The state of the removed light goes once light-command has read the removal it missed.
  await waitFor(async () => (await stateOf(deviceId)).length === 0, { timeoutMs: 15_000, what: 'the removed light’s state to be forgotten' });
}, 120_000);

it('announces an organization created by the staff CLI while the registry was stopped once the registry is back', async () => {
  const nc = await connect({ servers: fleet.handle.natsUrl });
  try {
    const jsm = await nc.jetstreamManager();
    await fleet.handle.stopService('device-registry');
    const { id } = (await fleet.admin('org', 'create', '--name', 'Created offline')) as { id: number };
    await fleet.handle.startService('device-registry');
    await waitFor(
      async () => {
        const last = await jsm.streams.getMessage('REGISTRY_EVENTS', { last_by_subj: 'evt.registry.org.changed.v1' });
        return last.json<{ org_node_id: number; change: string }>().org_node_id === id;
      },
      { timeoutMs: 15_000, what: 'the organization event in REGISTRY_EVENTS' },
    );
  } finally {
    await nc.close();
  }
}, 120_000);
