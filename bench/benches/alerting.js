'use strict';
// Sensor readings and the alert evaluation cycle (config-alerting).
//
// 1. Ingest: simulated lights (accelerated clocks) relay tdl sensor readings through Mosquitto
//    and mqtt-bridge into DEVICE_IN while config-alerting is paused (SIGSTOP); it is resumed and
//    the time to store every reading gives readings stored per second, reported as a ratio to a
//    bare multi-row INSERT of the same rows (1000 per statement) into a table of the same shape
//    in the same database, measured in the same run. Target: at least 0.5.
// 2. Cycle: BENCH_ALERT_SENSORS attached sensors (default 50,000; two per light) with a day of
//    readings each are put straight into the databases, then config-alerting runs its own cycles
//    at the production period. The first cycle writes light1 of every light (no level known yet);
//    the next one is a steady cycle (levels unchanged, the hourly pass's slot only). Each is timed
//    from its first shard claim to its last shard's writes (cycle_shards), and reported as a
//    fraction of the period. Target for the steady cycle: at most 0.1, i.e. one replica keeps up
//    with ten times as many sensors.
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { Client } = require('pg');
const { connect: natsConnect } = require('nats');
const { ROOT } = require('@fleet/launcher');
const { bareInsertRate } = require('../lib/bare-insert');
const { gatewayAdmin, databaseUrl, startPrivateFleet, waitUntil } = require('../lib/fleet-setup');

const SERVICES = ['device-registry', 'light-command', 'config-alerting', 'mqtt-bridge', 'gateway'];
const SECRET = 'Bench-Alerting!!';
const TARGET_INGEST_RATIO = 0.5;
const TARGET_CYCLE_FRACTION = 0.1;
/** Ingest: BENCH_ALERT_LIGHTS lights with 5 sensors each relay BENCH_ALERT_READINGS readings in all. */
const LIGHTS = Number(process.env.BENCH_ALERT_LIGHTS || 20);
const SENSORS_PER_LIGHT = 5;
const READINGS = Number(process.env.BENCH_ALERT_READINGS || 30000);
const SPEED = Number(process.env.BENCH_ALERT_SPEED || 1200);
/** Cycle: sensors attached (two per light), their readings' period over the day, the cycle period. */
const SENSORS = Number(process.env.BENCH_ALERT_SENSORS || 50000);
const READING_PERIOD_S = Number(process.env.BENCH_ALERT_READING_PERIOD_S || 60);
const PERIOD_MS = Number(process.env.BENCH_ALERT_PERIOD_MS || 120000);
const COLUMNS = ['device_id', 'tdl_id', 'at', 'temp_c', 'humidity', 'breach', 'received_at'];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const deviceSim = () => require(path.join(ROOT, 'packages', 'device-sim', 'dist'));

async function ingest(ctx, { fleet, provision, db, id }) {
  const { log } = ctx;
  const pid = fleet.services.find((s) => s.name === 'config-alerting').pid;
  const { SimulatedLight, SimClock } = deviceSim();
  // Readings are dated by the simulated clock: start it a day back so none lies in the future.
  const clock = new SimClock({ speed: SPEED, origin: Date.now() - 86_400_000 });
  const lights = [];
  ctx.onCleanup(async () => Promise.all(lights.map((l) => l.stop().catch(() => undefined))));
  log(`provisioning ${LIGHTS} lights (${SENSORS_PER_LIGHT} sensors each); pausing config-alerting; ${READINGS} readings at speed ${SPEED}...`);
  for (let i = 0; i < LIGHTS; i++) {
    const deviceId = `A${id.toUpperCase().slice(0, 5)}${i.toString(16).toUpperCase().padStart(6, '0')}`;
    await provision(deviceId);
    const sensors = Array.from({ length: SENSORS_PER_LIGHT }, (_, k) => ({ tdlId: `room.${k}:t`, periodSec: 60 }));
    lights.push(new SimulatedLight({ brokerUrl: fleet.mqttUrl, deviceId, rootSecret: SECRET, clock, sensors, logLimit: 0 }));
  }
  process.kill(pid, 'SIGSTOP');
  let resumed = false;
  const resume = () => {
    if (!resumed) process.kill(pid, 'SIGCONT');
    resumed = true;
  };
  ctx.onCleanup(async () => resume());
  const perLight = Math.ceil(READINGS / LIGHTS);
  await Promise.all(
    lights.map(async (light) => {
      let mine = 0;
      const done = new Promise((resolve) =>
        light.on('sent', (m) => {
          if (m.sub.startsWith('tdl/') && ++mine === perLight) light.stop().then(resolve, resolve);
        }),
      );
      await light.start();
      await done;
    }),
  );
  const nc = await natsConnect({ servers: fleet.natsUrl });
  ctx.onCleanup(async () => nc.close().catch(() => undefined));
  const jsm = await nc.jetstreamManager();
  const inStream = async () => {
    const info = await jsm.streams.info('DEVICE_IN', { subjects_filter: 'dev.in.light.*.tdl.>' });
    return Object.values(info.state.subjects ?? {}).reduce((a, b) => a + b, 0);
  };
  let total = -1;
  for (let stable = 0; stable < 10; ) {
    await sleep(100);
    const n = await inStream();
    stable = n === total ? stable + 1 : 0;
    total = n;
  }
  if (total < READINGS * 0.95) throw new Error(`only ${total} of ${READINGS} readings reached DEVICE_IN`);
  const stored = async () => Number((await db.query('SELECT count(*) AS n FROM readings')).rows[0].n);
  log(`${total} readings in DEVICE_IN; resuming config-alerting...`);
  const t0 = performance.now();
  resume();
  let firstStoredS;
  await waitUntil(
    async () => {
      const n = await stored();
      if (n > 0 && firstStoredS === undefined) firstStoredS = (performance.now() - t0) / 1000;
      return n >= total;
    },
    300_000,
    `${total} readings stored`,
  );
  const seconds = (performance.now() - t0) / 1000;
  log(`all stored ${seconds.toFixed(2)} s after the resume, the first within ${firstStoredS.toFixed(2)} s`);

  log('bare multi-row INSERT of the same rows (1000 per statement)...');
  const bareRate = await bareInsertRate(db, { table: 'readings', columns: COLUMNS });
  await db.query('DELETE FROM readings');
  return { readings: total, seconds, fleetRate: total / seconds, bareRate };
}

/** Cycles of cycle_shards whose every shard settled: from the first claim to the last shard's writes. */
async function settledCycles(db, shards) {
  const { rows } = await db.query(
    `SELECT cycle::text AS cycle, extract(epoch FROM max(settled_at) - min(claimed_at)) * 1000 AS took_ms,
            extract(epoch FROM max(done_at) - min(claimed_at)) * 1000 AS levels_ms,
            sum(devices)::int AS devices, sum(writes)::int AS writes, count(*)::int AS shards, count(settled_at)::int AS settled
     FROM cycle_shards GROUP BY cycle ORDER BY cycle`,
  );
  return rows.filter((r) => r.settled === shards && r.shards === shards).map((r) => ({ ...r, took_ms: Number(r.took_ms), levels_ms: Number(r.levels_ms) }));
}

async function cycle(ctx, { fleet, db, registryDb, id }) {
  const { log } = ctx;
  const lights = Math.ceil(SENSORS / 2);
  const perSensor = Math.floor(86_400 / READING_PERIOD_S);
  await fleet.stopService('config-alerting');
  log(`seeding ${lights} lights, ${SENSORS} sensors and ${perSensor} readings each over a day (${(SENSORS * perSensor).toLocaleString()} rows)...`);
  const s0 = performance.now();
  const orgNode = (await registryDb.query('SELECT org_node_id FROM devices LIMIT 1')).rows[0].org_node_id;
  const ids = `'B' || upper(substr(md5('${id}'), 1, 5)) || lpad(upper(to_hex(g)), 6, '0')`;
  await registryDb.query(
    `INSERT INTO devices (device_id, product, org_node_id, credential_source) SELECT ${ids}, 'light', $1, 'root_secret' FROM generate_series(0, $2 - 1) g`,
    [orgNode, lights],
  );
  await db.query(`INSERT INTO sensors (device_id, tdl_id) SELECT ${ids}, t FROM generate_series(0, $1 - 1) g, unnest(ARRAY['fridge:1', 'freezer:1']) t`, [lights]);
  // Bulk load: the key is dropped and built again, as the migrations define it, after the rows are in
  // (faster than row by row).
  const key = (await db.query("SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'readings_pkey'")).rows[0].def;
  await db.query('ALTER TABLE readings DROP CONSTRAINT readings_pkey');
  // A day up to now, written oldest minute first as lights send them, so the table's pages hold
  // every sensor's readings of a minute together (the lateral reference to k keeps the minutes
  // outermost); one sensor in 50 is warm (breaches), the rest drift around 4 °C.
  await db.query(
    `INSERT INTO readings (device_id, tdl_id, at, temp_c, humidity, breach, received_at)
     SELECT s.device_id, s.tdl_id, r.at, r.t, 45, r.t > 8, r.at
     FROM generate_series($2 - 1, 0, -1) k,
          LATERAL (SELECT s.device_id, s.tdl_id FROM sensors s WHERE k IS NOT NULL OFFSET 0) s,
          LATERAL (SELECT now() - (k * $1) * interval '1 second' AS at,
                          CASE WHEN hashtext(s.device_id) % 50 = 0 THEN 9.5 ELSE 4 END + (k % 7) * 0.1 AS t) r`,
    [READING_PERIOD_S, perSensor],
  );
  await db.query(`ALTER TABLE readings ADD CONSTRAINT readings_pkey ${key}`);
  await db.query('VACUUM ANALYZE readings');
  await db.query('ANALYZE sensors');
  await registryDb.query('ANALYZE devices');
  // Write the seeded pages out now, so the cycles measured below do not compete with that I/O.
  await db.query('CHECKPOINT');
  const seedSeconds = (performance.now() - s0) / 1000;
  const size = (await db.query("SELECT pg_size_pretty(pg_total_relation_size('readings')) AS s")).rows[0].s;
  log(`seeded in ${seedSeconds.toFixed(0)} s (readings: ${size}); starting config-alerting, period ${PERIOD_MS} ms...`);
  await db.query('DELETE FROM cycle_shards');
  await fleet.startService('config-alerting');
  const shards = 16;
  const [first, steady] = await waitUntil(
    async () => {
      const done = await settledCycles(db, shards);
      return done.length >= 2 ? done : undefined;
    },
    5 * PERIOD_MS + 600_000,
    'two settled cycles',
  );
  return { lights, sensors: SENSORS, readingsPerSensor: perSensor, seedSeconds, readingsSize: size, first, steady };
}

async function run(ctx) {
  const { log } = ctx;
  let finished = false;
  const clients = [];
  log(`starting ${SERVICES.join(', ')} (own nats-server, broker, databases)...`);
  const priv = await startPrivateFleet({
    services: SERVICES,
    privateNats: true,
    logLevel: process.env.BENCH_LOG_LEVEL || 'warn',
    serviceEnv: { EVALUATION_PERIOD_MS: String(PERIOD_MS), EVALUATION_SHARDS: '16' },
  });
  const { fleet, id, databasePrefix } = priv;
  ctx.onCleanup(async () => {
    for (const c of clients) await c.end().catch(() => undefined);
    // BENCH_KEEP_LOGS=1 keeps the services' logs of a good run too.
    await priv.cleanup({ keepLogs: !finished || Boolean(process.env.BENCH_KEEP_LOGS) });
  });
  const gatewayDb = priv.gatewayDatabaseUrl;
  const partner = await gatewayAdmin(gatewayDb, ['partner', 'create', '--name', `Bench alerting ${id}`, '--permissions', 'all', '--access-all-devices', '--requests-per-min', '100000000']);
  const { key } = await gatewayAdmin(gatewayDb, ['key', 'issue', '--partner', partner.id]);
  const provision = async (deviceId) => {
    const res = await fetch(`${fleet.gatewayUrl}/v1/devices/${deviceId}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET, product: 'light' }),
    });
    if (res.status !== 201) throw new Error(`provisioning ${deviceId} answered ${res.status}: ${await res.text()}`);
  };
  const db = new Client({ connectionString: databaseUrl(`${databasePrefix}config_alerting`) });
  const registryDb = new Client({ connectionString: databaseUrl(`${databasePrefix}device_registry`) });
  clients.push(db, registryDb);
  await db.connect();
  await registryDb.connect();

  const ingested = await ingest(ctx, { fleet, provision, db, id });
  const cycles = await cycle(ctx, { fleet, db, registryDb, id });
  const ingestRatio = ingested.fleetRate / ingested.bareRate;
  const steadyFraction = cycles.steady.took_ms / PERIOD_MS;
  finished = true;
  return {
    bench: 'alerting',
    title: 'Sensor readings: lights → broker → bridge → DEVICE_IN → config-alerting → Postgres vs a bare multi-row INSERT; one evaluation cycle over attached sensors with a day of readings',
    settings: { lights: LIGHTS, sensors_per_light: SENSORS_PER_LIGHT, speed: SPEED, cycle_sensors: SENSORS, reading_period_s: READING_PERIOD_S, period_ms: PERIOD_MS },
    ingest: { readings: ingested.readings, seconds: ingested.seconds, fleet_readings_per_s: ingested.fleetRate, bare_insert_rows_per_s: ingested.bareRate, ratio: ingestRatio, target: TARGET_INGEST_RATIO },
    cycle: { ...cycles, steady_fraction: steadyFraction, first_fraction: cycles.first.took_ms / PERIOD_MS, target: TARGET_CYCLE_FRACTION },
    pass: ingestRatio >= TARGET_INGEST_RATIO && steadyFraction <= TARGET_CYCLE_FRACTION,
  };
}

function table(result) {
  const c = result.cycle;
  const ms = (x) => `${(x / 1000).toFixed(2)} s`;
  return {
    head: ['measure', 'value'],
    rows: [
      ['readings stored / s (fleet, draining DEVICE_IN)', result.ingest.fleet_readings_per_s.toFixed(0)],
      ['rows / s (bare multi-row INSERT, same rows)', result.ingest.bare_insert_rows_per_s.toFixed(0)],
      ['ingest ratio (target >= 0.5)', result.ingest.ratio.toFixed(3)],
      [`first cycle (${c.first.devices} lights, ${c.first.writes} light1 writes)`, `${ms(c.first.took_ms)} (levels ${ms(c.first.levels_ms)})`],
      [`steady cycle (${c.steady.devices} lights, ${c.steady.writes} light1 writes)`, `${ms(c.steady.took_ms)} (levels ${ms(c.steady.levels_ms)})`],
      ['steady cycle / period (target <= 0.1)', c.steady_fraction.toFixed(3)],
      ['first cycle / period', c.first_fraction.toFixed(3)],
    ],
    notes: [
      `ingest: ${result.settings.lights} lights × ${result.settings.sensors_per_light} sensors sent ${result.ingest.readings} readings while config-alerting was paused; stored in ${result.ingest.seconds.toFixed(2)} s after it resumed.`,
      `cycle: ${c.sensors} sensors on ${c.lights} lights, ${c.readingsPerSensor} readings each over a day (${c.readingsSize}), period ${result.settings.period_ms} ms, one replica, 16 shards.   ${result.pass ? 'OK' : 'BELOW TARGET'}`,
    ],
  };
}

module.exports = {
  name: 'alerting',
  description: 'Sensor readings through broker, bridge and config-alerting vs a bare multi-row INSERT; one evaluation cycle over 50,000 sensors with a day of readings',
  run,
  table,
};
