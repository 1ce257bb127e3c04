import type { MqttClient } from 'mqtt';

/** Resolves or rejects like the promise, or rejects after ms. */
export async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Disconnects cleanly, or drops the socket when the broker does not answer in time. */
export async function endClient(client: MqttClient, ms = 3000): Promise<void> {
  try {
    await withTimeout(client.endAsync(), ms);
  } catch {
    await client.endAsync(true);
  }
}
