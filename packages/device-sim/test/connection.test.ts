import type { MqttClient } from 'mqtt';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { DeviceConnection, type ConnectionEvents } from '../src/connection';
import { BROKER } from './helpers';

/** A connection whose events are counted. */
function counted(): { connection: DeviceConnection; seen: { connected: number; closed: number } } {
  const seen = { connected: 0, closed: 0 };
  const events: ConnectionEvents = {
    connected: () => seen.connected++,
    closed: () => seen.closed++,
    refused: () => undefined,
    error: () => undefined,
    message: () => undefined,
  };
  return { connection: new DeviceConnection(BROKER, events), seen };
}

function clientOf(connection: DeviceConnection): MqttClient {
  return (connection as unknown as { client: MqttClient }).client;
}

// Each client waits a minute before reconnecting on its own: longer than any of these tests.
describe('DeviceConnection', () => {
  it('reports the link down when the socket its session runs on closes', async () => {
    const { connection, seen } = counted();
    const id = randomDeviceId();
    try {
      await connection.open({ clientId: id, username: id, protocolVersion: 5, reconnectPeriod: 60_000, clean: true });
      clientOf(connection).stream.destroy();
      await waitFor(() => seen.closed === 1, { what: 'the link to be reported down' });
    } finally {
      connection.kill();
    }
  });

  it('does not take the close of a socket the client has replaced for the link going down', async () => {
    const { connection, seen } = counted();
    const id = randomDeviceId();
    try {
      await connection.open({ clientId: id, username: id, protocolVersion: 5, reconnectPeriod: 60_000, clean: true });
      const client = clientOf(connection);
      const replaced = client.stream;
      // A second socket under the same client id: the broker takes the session over and closes
      // the first one, whose close mqtt.js relays as the client's own `close`.
      client.connect();
      await waitFor(() => seen.connected === 2 && replaced.closed, { what: 'the new session and the old socket closed' });
      expect(client.stream).not.toBe(replaced);
      expect(seen.closed).toBe(0);
    } finally {
      connection.kill();
    }
  });
});
