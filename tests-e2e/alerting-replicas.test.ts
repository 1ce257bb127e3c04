import { Client } from 'pg';
import { MqttProbe, SimulatedLight } from '@fleet/device-sim';
import { databaseUrl, randomDeviceId, waitFor } from '@fleet/test-kit';
import { OwnFleet } from './support/own-fleet';

/**
 * Two config-alerting replicas share the evaluation cycles; one is killed (SIGKILL) in the middle
 * of committing a shard. The other takes the shard over within the same cycle once the lease
 * runs out: every light is still evaluated exactly once per cycle, and every sensor reading the
 * broker took is stored exactly once.
 */

const SECRET = 'Replicas-E2E-S!!';
const PERIOD_MS = 6000;
const LEASE_MS = 1000;
const LIGHTS = 12;

let fleet: OwnFleet;
let db: Client;
const lights: SimulatedLight[] = [];

interface AlertStateRow {
  device_id: string;
  evaluated_cycle: string;
  first_cycle: string;
  evaluations: number;
}

const states = async (): Promise<AlertStateRow[]> =>
  (await db.query<AlertStateRow>('SELECT device_id, evaluated_cycle::text, first_cycle::text, evaluations FROM alert_states')).rows;

beforeAll(async () => {
  fleet = await OwnFleet.start({
    services: ['device-registry', 'light-command', 'config-alerting', 'mqtt-bridge', 'gateway'],
    replicas: { 'config-alerting': 2 },
    env: { EVALUATION_PERIOD_MS: String(PERIOD_MS), EVALUATION_LEASE_MS: String(LEASE_MS), EVALUATION_SHARDS: '4' },
  });
  db = new Client({ connectionString: databaseUrl(`${fleet.databasePrefix}config_alerting`) });
  await db.connect();
}, 120_000);

afterAll(async () => {
  await Promise.all(lights.map((l) => l.stop().catch(() => undefined)));
  await db?.end();
  await fleet?.destroy();
}, 60_000);

it('evaluates every light once per cycle and stores every reading once when a replica is killed mid-commit', async () => {
  const partner = await fleet.partnerWithKey(['--permissions', 'device_provisioning,config_write', '--access-all-devices']);
  const probe = await MqttProbe.open(fleet.mqttUrl, ['light/+/tdl/#'], { username: fleet.handle.mqttAdmin.username, password: fleet.handle.mqttAdmin.password });
  try {
    for (let k = 0; k < LIGHTS; k++) {
      const id = randomDeviceId();
      const body = { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET, product: 'light' };
      expect((await fleet.api('POST', `/v1/devices/${id}`, { key: partner.key, body })).status).toBe(201);
      expect((await fleet.api('POST', `/v1/devices/${id}/sensors`, { key: partner.key, body: { tdl_id: 't1' } })).status).toBe(201);
      const light = new SimulatedLight({ brokerUrl: fleet.mqttUrl, deviceId: id, rootSecret: SECRET, sensors: [{ tdlId: 't1', periodSec: 1 }] });
      lights.push(light);
      await light.start();
    }
    await waitFor(async () => {
      const rows = await states();
      return rows.length === LIGHTS && rows.every((s) => s.evaluations >= 2);
    }, { timeoutMs: 6 * PERIOD_MS, what: 'two cycles over every light' });

    // The next shard commit, whichever replica makes it, stalls inside its commit (a trigger that
    // sleeps, once), and that replica is killed there: its transaction never commits. Sequences
    // tell the test which shard (setval is not undone when the transaction is).
    await db.query(`
      CREATE SEQUENCE stall_once; CREATE SEQUENCE stalled_cycle MINVALUE 0; CREATE SEQUENCE stalled_shard MINVALUE 0;
      CREATE FUNCTION stall_once() RETURNS trigger AS $$
      BEGIN
        IF NEW.done_at IS NOT NULL AND OLD.done_at IS NULL AND nextval('stall_once') = 1 THEN
          PERFORM setval('stalled_cycle', NEW.cycle); PERFORM setval('stalled_shard', NEW.shard + 1);
          PERFORM pg_sleep(1.5);
        END IF;
        RETURN NEW;
      END $$ LANGUAGE plpgsql;
      CREATE TRIGGER stall_once BEFORE UPDATE ON cycle_shards FOR EACH ROW EXECUTE FUNCTION stall_once();`);
    const stalled = await waitFor(
      async () => {
        const [at] = (await db.query<{ cycle: string; shard: string }>('SELECT (SELECT last_value FROM stalled_cycle)::text AS cycle, (SELECT last_value FROM stalled_shard)::text AS shard')).rows;
        if (!at || at.shard === '0') return undefined;
        const shard = Number(at.shard) - 1;
        const held = await db.query<{ owner: string }>('SELECT owner FROM cycle_shards WHERE cycle = $1 AND shard = $2 AND done_at IS NULL', [at.cycle, shard]);
        return held.rows[0] ? { cycle: at.cycle, shard, owner: held.rows[0].owner } : undefined;
      },
      { timeoutMs: 6 * PERIOD_MS, intervalMs: 10, what: 'a replica inside a shard commit' },
    );
    // The owner is `<host>:<pid>:<random>` (services/config-alerting/src/main.ts).
    const victim = Number(stalled.owner.split(':').at(-2));
    expect([fleet.handle.pidOf('config-alerting', 0), fleet.handle.pidOf('config-alerting', 1)]).toContain(victim);
    process.kill(victim, 'SIGKILL');
    const cycle = BigInt(stalled.cycle);

    // The survivor takes the shard over in the same cycle.
    const takenOver = await waitFor(
      async () => (await db.query<{ owner: string }>('SELECT owner FROM cycle_shards WHERE cycle = $1 AND shard = $2 AND done_at IS NOT NULL', [stalled.cycle, stalled.shard])).rows[0],
      { timeoutMs: PERIOD_MS * 2, what: 'the stalled shard completed by the other replica' },
    );
    expect(takenOver.owner).not.toContain(`:${victim}:`);
    await waitFor(async () => (await states()).every((s) => BigInt(s.evaluated_cycle) >= cycle + 2n), { timeoutMs: 6 * PERIOD_MS, what: 'two more cycles over every light' });
    for (const s of await states()) {
      // Once per cycle since its first: none skipped, none doubled.
      expect({ device: s.device_id, evaluations: s.evaluations }).toEqual({ device: s.device_id, evaluations: Number(BigInt(s.evaluated_cycle) - BigInt(s.first_cycle)) + 1 });
    }

    // Every reading the broker took is stored, once.
    await Promise.all(lights.map((l) => l.stop()));
    const relayed = new Set(
      probe.messages.map((m) => {
        const [, device, , tdl] = m.topic.split('/');
        return `${device}/${tdl}/${(JSON.parse(m.text) as { at: number }).at}`;
      }),
    );
    expect(relayed.size).toBeGreaterThan(LIGHTS * 5);
    const stored = async () =>
      (await db.query<{ key: string }>("SELECT device_id || '/' || tdl_id || '/' || extract(epoch FROM at)::bigint AS key FROM readings")).rows.map((r) => r.key);
    // Readings the killed replica had fetched but not acknowledged come back after the consumer's ack wait (30 s).
    await waitFor(async () => (await stored()).length >= relayed.size, { timeoutMs: 50_000, intervalMs: 500, what: 'every relayed reading stored' });
    expect(new Set(await stored())).toEqual(relayed);
    expect((await stored()).length).toBe(relayed.size);
  } finally {
    await probe.close();
  }
}, 180_000);
