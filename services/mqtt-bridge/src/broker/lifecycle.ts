import type { IClientOptions, MqttClient } from 'mqtt';

/**
 * mqtt.js traces every packet through the `debug` module: a dozen calls a packet, each gathering
 * its arguments even when no trace is enabled, about 4% of the bridge's CPU under load. The
 * bridge's clients get a logger that does nothing, unless the trace is wanted (DEBUG set).
 */
export function clientTrace(trace: boolean | undefined): Pick<IClientOptions, 'log'> {
  return trace ? {} : { log: () => undefined };
}

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
