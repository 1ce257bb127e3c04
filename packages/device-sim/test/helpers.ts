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
