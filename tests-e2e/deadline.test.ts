import { SimulatedLight } from '@fleet/device-sim';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { OwnFleet } from './support/own-fleet';
import type { Answer } from './support/api';

/**
 * A 503 from provisioning is true: device-registry is paused (SIGSTOP) past the gateway's
 * deadline at varied moments of a provisioning, and then resumed. Each attempt is either 201
 * with the device there, or 503 with the device absent; the same request retried with the same
 * Idempotency-Key then gets 201 with a generated password the device can connect with (or the
 * replay of the first 201), never a 409 for work that was said not to have happened.
 *
 * A fleet of its own with short timeouts, so a pause past the deadline stays short.
 */

const TIMEOUT_MS = 800;
const GRACE_MS = 300;
/** How long the registry stays paused: past the deadline and the gateway's grace. */
const PAUSE_MS = TIMEOUT_MS + GRACE_MS + 400;
/** How many pause moments are spread over one provisioning's usual duration. */
const STEPS = 12;

let fleet: OwnFleet;
let key: string;

beforeAll(async () => {
  fleet = await OwnFleet.start({
    services: ['device-registry', 'mqtt-bridge', 'gateway'],
    env: { BUS_REQUEST_TIMEOUT_MS: String(TIMEOUT_MS), BUS_OUTCOME_GRACE_MS: String(GRACE_MS), BRIDGE_REQUEST_TIMEOUT_MS: String(TIMEOUT_MS) },
  });
  ({ key } = await fleet.partnerWithKey(['--permissions', 'device_provisioning', '--access-all-devices']));
}, 60_000);

afterAll(async () => {
  await fleet?.destroy();
}, 60_000);

/** Resolves at `at` (performance.now() time) to within a fraction of a millisecond, letting I/O run meanwhile. */
async function until(at: number): Promise<void> {
  while (performance.now() < at) await new Promise((r) => setImmediate(r));
}

const provision = (deviceId: string, idempotencyKey: string): Promise<Answer> =>
  fleet.api('POST', `/v1/devices/${deviceId}`, { key, body: { credential_format: 'derived-v1' }, headers: { 'Idempotency-Key': idempotencyKey } });

/** The device record as the registry has it now: 200 or 404 (waits out 503s while it recovers). */
async function deviceStatus(deviceId: string): Promise<number> {
  return waitFor(
    async () => {
      const res = await fleet.api('GET', `/v1/devices/${deviceId}`, { key });
      return res.status === 503 ? undefined : res.status;
    },
    { timeoutMs: 10_000, intervalMs: 100, what: `the registry answering for ${deviceId}` },
  );
}

/** A light with the generated root secret connects to the fleet's broker. */
async function connects(deviceId: string, rootSecret: string): Promise<boolean> {
  const device = new SimulatedLight({ brokerUrl: fleet.mqttUrl, deviceId, rootSecret, connectTimeoutMs: 5000 });
  try {
    await device.start();
    return true;
  } catch {
    return false;
  } finally {
    await device.stop().catch(() => undefined);
  }
}

describe('provisioning while device-registry is paused past the deadline', () => {
  it('answers 201 with the device stored, or 503 with nothing stored; a retry with the same key then succeeds', async () => {
    const registry = fleet.handle.pidOf('device-registry');
    if (!registry) throw new Error('device-registry is not running');
    // The pause moments cover one provisioning as it usually runs here: from before the registry
    // has the request, through its transaction and the broker call, to after its reply.
    const took: number[] = [];
    for (let k = 0; k < 5; k += 1) {
      const started = performance.now();
      expect((await provision(randomDeviceId(), `warm-${k}-${Date.now()}`)).status).toBe(201);
      took.push(performance.now() - started);
    }
    const usual = took.sort((a, b) => a - b)[2] as number;
    const pauses = [...Array.from({ length: STEPS }, (_, k) => (usual * 1.2 * k) / STEPS), usual * 3];
    const outcomes: string[] = [];

    for (const pause of pauses) {
      const pauseAfterMs = Math.round(pause * 10) / 10;
      const deviceId = randomDeviceId();
      const idempotencyKey = `deadline-${deviceId}`;
      const sent = performance.now();
      const attempt = provision(deviceId, idempotencyKey);
      await until(sent + pause);
      process.kill(registry, 'SIGSTOP');
      // A stall of bounded length, whatever the gateway does meanwhile (a stall that outlasts the
      // gateway's commit wait, BUS_COMMIT_WAIT_MS, is the documented limit and not tried here).
      const resumed = new Promise((r) => setTimeout(r, PAUSE_MS)).then(() => process.kill(registry, 'SIGCONT'));
      let first: Answer;
      try {
        first = await attempt;
      } finally {
        await resumed;
      }
      outcomes.push(`${pauseAfterMs}ms:${first.status}`);
      expect(`paused after ${pauseAfterMs} ms: ${first.status}`).toMatch(/: (201|503)$/);

      // What the first answer said is what the registry holds once it has caught up.
      expect({ pauseAfterMs, first: first.text, stored: await deviceStatus(deviceId) }).toEqual({ pauseAfterMs, first: first.text, stored: first.status === 201 ? 200 : 404 });

      const retry = await waitFor(
        async () => {
          const res = await provision(deviceId, idempotencyKey);
          return res.status === 503 ? undefined : res;
        },
        { timeoutMs: 10_000, intervalMs: 200, what: `a retry of ${deviceId} that is not 503` },
      );
      expect({ pauseAfterMs, status: retry.status }).toEqual({ pauseAfterMs, status: 201 });
      if (first.status === 201) {
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(retry.body).toEqual(first.body);
      }
      const password = retry.body.password;
      expect(typeof password).toBe('string');
      expect({ pauseAfterMs, connects: await connects(deviceId, password as string) }).toEqual({ pauseAfterMs, connects: true });
    }
    console.log(`provisioning usually takes ${usual.toFixed(1)} ms here; answers by pause: ${outcomes.join(' ')}`);
    // The earliest pause always stops the registry before it can answer in time.
    expect(outcomes[0]).toMatch(/:503$/);
  }, 120_000);
});
