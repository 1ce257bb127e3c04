import { randomBytes } from 'node:crypto';
import { testEnv } from '@fleet/test-kit';
import { clearRetained, MqttProbe } from '@fleet/device-sim';

export const BROKER = testEnv.mqttUrl;
export const ROOT_SECRET = 'Sim-Test-Secret!';

/** A topic root of its own for one test file, so runs never see each other's traffic. */
export function uniqueRoot(tag: string): string {
  return `simt-${tag}-${randomBytes(4).toString('hex')}`;
}

/** Options that keep the anonymous broker tidy: MQTT 5 sessions that expire soon after a test. */
export const TIDY = { protocolVersion: 5 as const, sessionExpirySec: 10, rebootDelayMs: 100 };

export async function openProbe(root: string): Promise<MqttProbe> {
  return MqttProbe.open(BROKER, [`${root}/#`]);
}

export async function cleanup(root: string, probe?: MqttProbe): Promise<void> {
  await probe?.close();
  await clearRetained(BROKER, `${root}/#`);
}

/** A TCP proxy in front of the broker whose connections a test can cut (the broker sees a dropped socket). */
export async function brokerProxy(): Promise<{ url: string; cut: () => void; resume: () => void; close: () => Promise<void> }> {
  const { createServer, connect } = await import('node:net');
  const target = new URL(BROKER);
  const pairs = new Set<[import('node:net').Socket, import('node:net').Socket]>();
  let blocked = false;
  const server = createServer((client) => {
    if (blocked) {
      client.destroy();
      return;
    }
    const upstream = connect(Number(target.port || 1883), target.hostname);
    const pair: [import('node:net').Socket, import('node:net').Socket] = [client, upstream];
    pairs.add(pair);
    const end = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `mqtt://127.0.0.1:${port}`,
    /** Drops every connection and refuses new ones until resume(). */
    cut: () => {
      blocked = true;
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
    },
    resume: () => {
      blocked = false;
    },
    close: async () => {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      await new Promise((r) => server.close(r));
    },
  };
}
