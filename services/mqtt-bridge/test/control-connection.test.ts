import mqtt from 'mqtt';
import { createLogger } from '@fleet/service-kit';
import { testEnv, uniqueId, waitFor } from '@fleet/test-kit';
import { ControlConnection } from '../src/broker/control';

/**
 * The control connection against the broker on this machine (anonymous on its default
 * port). A publish the broker refuses by closing the connection must not be sent again on
 * the next connection: that would keep every later command of every partner failing.
 */
describe('ControlConnection', () => {
  let control: ControlConnection;

  beforeAll(() => {
    control = new ControlConnection({
      url: testEnv.mqttUrl,
      clientId: uniqueId('control-test'),
      username: '',
      password: '',
      dynsecTimeoutMs: 2000,
      publishTimeoutMs: 2000,
      logger: createLogger('mqtt-bridge-test', 'silent'),
    });
  });

  afterAll(() => control.close());

  const connected = () => waitFor(async () => (control as unknown as { client: mqtt.MqttClient }).client.connected, { what: 'control connection up' });

  it('fails a message the broker drops the connection for, and is back for the next one without sending it again', async () => {
    await connected();
    const watcher = await mqtt.connectAsync(testEnv.mqttUrl, { protocolVersion: 5 });
    const topic = `control-test/${uniqueId('t')}`;
    const seen: string[] = [];
    watcher.on('message', (_t, payload) => seen.push(payload.toString()));
    await watcher.subscribeAsync(`${topic}/#`, { qos: 1 });
    try {
      // Bypasses the publish handler's check on purpose: this is what the check guards against.
      await expect(control.publish(`${topic}/\u0085`, Buffer.from('refused'), 1, false)).rejects.toThrow();
      await connected();
      await control.publish(`${topic}/ok`, Buffer.from('after'), 1, false);
      await waitFor(async () => seen.includes('after'), { what: 'the next message delivered' });
      expect(seen).toEqual(['after']);
    } finally {
      await watcher.endAsync(true);
    }
  }, 20_000);
});
