#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { SimClock } from './clock';
import { deriveBrokerPassword, deviceIdsFromPrefix, isDeviceId, PRODUCTS, type Product } from './credentials';
import { BAD_VALUE_KINDS, type BadValueKind, type ClockMode } from './meter-model';
import type { SensorOptions } from './light';
import { DevicePool, type PoolDeviceOptions } from './pool';

const USAGE = `fleet-sim: simulated lights and meters for a running fleet (device protocol v1)

  fleet-sim [run] --broker URL --product light|meter (--count N --id-prefix HEX [--start-index K] | --ids A,B)
                  (--root-secret S | --password-file FILE) [options]
  fleet-sim ids --id-prefix HEX --count N [--start-index K]         print device ids, one a line
  fleet-sim password --product P --root-secret S --ids A,B | --id-prefix HEX --count N
                                                                     print "<id> <broker password>"
  fleet-sim provision --gateway URL --key API_KEY --product P --root-secret S (--id-prefix HEX --count N | --ids A,B)
                  [--org NAME] [--name-prefix TEXT]                  POST /v1/devices/{id} for each (409 = already there)

run options:
  --speed X              simulated seconds per real second (default 1)
  --start-at ISO         simulated clock starts here (default now); e.g. a day ago with --speed 60
  --topic-root R         topic root (default the product)
  --concurrency N        connects in flight (default 100)       --connect-rate N  connects per second (default unlimited)
  --status-every S       seconds between status lines (default 5)
  --heartbeat S          simulated seconds between heartbeats (default 300)
  --protocol 4|5         MQTT 3.1.1 (default) or 5              --session-expiry S  MQTT 5 session expiry
  --log-lines            send log> lines on sys/resp            --fetch-files       addfile/setcert really download
  light:  --sensors N    tdl sensors per light (ids <device_id>-t<k>, every --sensor-period S, default 60)
          --sensor-temp C (default 4, "none": no temperature)  --sensor-humidity H (default 45, "none")
          --sensor-breach-above C  breach while temp_c is above C (default 8)
  meter:  --interval S (default 900)  --ct N (default 1)  --clock synced|free|none  --load-w W
          --sample-error busy|config_mode|unsupported|rejected|no_snapshot|no_answer  --reset-failure REASON
          --duplicate-records  --late-records  --bad-values [--bad-kinds a,b]  --same-sid-on-restart
  misbehaviour: --silent  --refuse [--refuse-verbs a,b] [--refuse-reason R]  --drop-will
  --password-file FILE   JSON: {"<id>": "<password>"} or [{"device_id", "password" | "root_secret"}]
`;

const options = {
  broker: { type: 'string' },
  product: { type: 'string' },
  count: { type: 'string' },
  'id-prefix': { type: 'string' },
  'start-index': { type: 'string' },
  ids: { type: 'string' },
  'root-secret': { type: 'string' },
  'password-file': { type: 'string' },
  speed: { type: 'string' },
  'start-at': { type: 'string' },
  'topic-root': { type: 'string' },
  concurrency: { type: 'string' },
  'connect-rate': { type: 'string' },
  'status-every': { type: 'string' },
  heartbeat: { type: 'string' },
  protocol: { type: 'string' },
  'session-expiry': { type: 'string' },
  'log-lines': { type: 'boolean' },
  'fetch-files': { type: 'boolean' },
  sensors: { type: 'string' },
  'sensor-period': { type: 'string' },
  'sensor-temp': { type: 'string' },
  'sensor-humidity': { type: 'string' },
  'sensor-breach-above': { type: 'string' },
  interval: { type: 'string' },
  ct: { type: 'string' },
  clock: { type: 'string' },
  'load-w': { type: 'string' },
  'sample-error': { type: 'string' },
  'reset-failure': { type: 'string' },
  'duplicate-records': { type: 'boolean' },
  'late-records': { type: 'boolean' },
  'bad-values': { type: 'boolean' },
  'bad-kinds': { type: 'string' },
  'same-sid-on-restart': { type: 'boolean' },
  silent: { type: 'boolean' },
  refuse: { type: 'boolean' },
  'refuse-verbs': { type: 'string' },
  'refuse-reason': { type: 'string' },
  'drop-will': { type: 'boolean' },
  gateway: { type: 'string' },
  key: { type: 'string' },
  org: { type: 'string' },
  'name-prefix': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Values = ReturnType<typeof parse>['values'];

function parse(argv: string[]) {
  return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
}

class UsageError extends Error {}

function num(values: Values, name: keyof Values, fallback?: number): number | undefined {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (typeof raw !== 'string' || !Number.isFinite(n) || n < 0) throw new UsageError(`--${name} must be a non-negative number`);
  return n;
}

/** A reading's base value: a number (may be negative), or "none" for a sensor that reports null. */
function reading(values: Values, name: 'sensor-temp' | 'sensor-humidity'): number | null | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  if (raw === 'none') return null;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${name} must be a number or "none"`);
  return n;
}

function sensorsOf(values: Values, id: string): SensorOptions[] {
  const count = num(values, 'sensors', 0) ?? 0;
  const breach = values['sensor-breach-above'];
  const breachAboveC = breach === undefined ? undefined : Number(breach);
  if (breachAboveC !== undefined && (breach!.trim() === '' || !Number.isFinite(breachAboveC))) throw new UsageError('--sensor-breach-above must be a number');
  const base = { periodSec: num(values, 'sensor-period', 60), tempC: reading(values, 'sensor-temp'), humidity: reading(values, 'sensor-humidity'), breachAboveC };
  return Array.from({ length: count }, (_, k) => ({ tdlId: `${id}-t${k + 1}`, ...base }));
}

function product(values: Values): Product {
  const p = values.product ?? 'light';
  if (!(PRODUCTS as readonly string[]).includes(p)) throw new UsageError('--product must be light or meter');
  return p as Product;
}

function ids(values: Values, fromFile?: string[]): string[] {
  if (values.ids) {
    const list = values.ids.split(',').map((s) => s.trim().toUpperCase());
    for (const id of list) if (!isDeviceId(id)) throw new UsageError(`bad device id '${id}'`);
    return list;
  }
  if (values['id-prefix'] !== undefined || values.count !== undefined) {
    const count = num(values, 'count');
    if (count === undefined || !Number.isInteger(count)) throw new UsageError('--count N is needed with --id-prefix');
    try {
      return deviceIdsFromPrefix(values['id-prefix'] ?? '', count, num(values, 'start-index', 0));
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  if (fromFile) return fromFile;
  throw new UsageError('give --count N --id-prefix HEX, or --ids');
}

/** {"<id>": "<password>"} or [{device_id, password | mqtt_password | root_secret}] */
function readPasswordFile(file: string): Map<string, { password: string } | { rootSecret: string }> {
  const data: unknown = JSON.parse(readFileSync(file, 'utf8'));
  const out = new Map<string, { password: string } | { rootSecret: string }>();
  const add = (id: string, entry: unknown) => {
    const key = id.toUpperCase();
    if (typeof entry === 'string') out.set(key, { password: entry });
    else if (entry && typeof entry === 'object') {
      const e = entry as Record<string, unknown>;
      const pw = e.password ?? e.mqtt_password;
      if (typeof pw === 'string') out.set(key, { password: pw });
      else if (typeof e.root_secret === 'string') out.set(key, { rootSecret: e.root_secret });
      else throw new UsageError(`${file}: no password or root_secret for ${id}`);
    }
  };
  if (Array.isArray(data)) for (const e of data) add(String((e as Record<string, unknown>).device_id ?? ''), e);
  else if (data && typeof data === 'object') for (const [id, e] of Object.entries(data)) add(id, e);
  else throw new UsageError(`${file}: expected a JSON object or array`);
  return out;
}

function deviceOptions(values: Values, prod: Product): PoolDeviceOptions {
  const o: PoolDeviceOptions = {};
  if (values['topic-root']) o.topicRoot = values['topic-root'];
  if (values.heartbeat) o.heartbeatSec = num(values, 'heartbeat');
  if (values.protocol) {
    if (values.protocol !== '4' && values.protocol !== '5') throw new UsageError('--protocol must be 4 or 5');
    o.protocolVersion = Number(values.protocol) as 4 | 5;
  }
  if (values['session-expiry']) o.sessionExpirySec = num(values, 'session-expiry');
  if (values['log-lines']) o.logLines = true;
  if (values['fetch-files']) o.fetchFiles = true;
  if (values.silent) o.silent = true;
  if (values.refuse) o.refuse = values['refuse-verbs'] ? values['refuse-verbs'].split(',') : true;
  if (values['refuse-reason']) o.refuseReason = values['refuse-reason'];
  if (values['drop-will']) o.dropWillOnDisconnect = true;
  if (prod === 'meter') {
    if (values.interval) o.intervalSec = num(values, 'interval');
    if (values.ct) o.ctTurns = num(values, 'ct');
    if (values.clock) {
      if (!['synced', 'free', 'none'].includes(values.clock)) throw new UsageError('--clock must be synced, free or none');
      o.clockMode = values.clock as ClockMode;
    }
    if (values['load-w']) o.loadW = num(values, 'load-w');
    if (values['sample-error']) {
      if (!['busy', 'config_mode', 'unsupported', 'rejected', 'no_snapshot', 'no_answer'].includes(values['sample-error'])) throw new UsageError('bad --sample-error');
      o.sampleError = values['sample-error'] as PoolDeviceOptions['sampleError'];
    }
    if (values['reset-failure']) o.resetEnergyFailure = values['reset-failure'];
    if (values['duplicate-records']) o.duplicateRecords = true;
    if (values['late-records']) o.lateRecords = true;
    if (values['bad-values']) {
      const kinds = values['bad-kinds'] ? values['bad-kinds'].split(',') : [...BAD_VALUE_KINDS];
      for (const k of kinds) if (!(BAD_VALUE_KINDS as readonly string[]).includes(k)) throw new UsageError(`bad --bad-kinds entry '${k}' (one of ${BAD_VALUE_KINDS.join(', ')})`);
      o.badValues = kinds as BadValueKind[];
    }
    if (values['same-sid-on-restart']) o.newSidOnRestart = false;
  }
  return o;
}

async function run(values: Values): Promise<void> {
  if (!values.broker) throw new UsageError('--broker URL is needed (e.g. mqtt://127.0.0.1:1883)');
  const prod = product(values);
  const fileCreds = values['password-file'] ? readPasswordFile(values['password-file']) : undefined;
  const rootSecret = values['root-secret'];
  if (!fileCreds && !rootSecret) throw new UsageError('give --root-secret S or --password-file FILE');
  const deviceIds = ids(values, fileCreds ? [...fileCreds.keys()] : undefined);
  const perDeviceSensors = num(values, 'sensors', 0) ?? 0;
  sensorsOf(values, 'check'); // refuses bad sensor options before any device connects
  const origin = values['start-at'] !== undefined ? Date.parse(values['start-at']) : undefined;
  if (origin !== undefined && Number.isNaN(origin)) throw new UsageError('--start-at must be a date-time, e.g. 2026-11-21T00:00:00Z');
  const clock = new SimClock({ speed: num(values, 'speed', 1), origin });
  clock.ref();
  const pool = new DevicePool({
    brokerUrl: values.broker,
    product: prod,
    ids: deviceIds,
    clock,
    concurrency: num(values, 'concurrency', 100),
    connectRate: num(values, 'connect-rate'),
    credentials: (id) => {
      const c = fileCreds?.get(id) ?? (rootSecret ? { rootSecret } : undefined);
      if (!c) throw new UsageError(`no credentials for ${id} in ${values['password-file']}`);
      return c;
    },
    device: deviceOptions(values, prod),
    perDevice: prod === 'light' && perDeviceSensors > 0 ? (id) => ({ sensors: sensorsOf(values, id) }) : undefined,
  });

  if (prod === 'meter' && clock.speed > 1 && (values.clock ?? 'synced') === 'synced' && origin === undefined) {
    console.log(
      `[fleet-sim] note: synced meters at speed ${clock.speed} stamp records ahead of real time; the platform quarantines starts in the future. ` +
        'Start the simulated clock in the past (--start-at) or use --clock free.',
    );
  }
  const t0 = Date.now();
  let last = { sent: 0, at: t0 };
  const status = (phase: string) => {
    const s = pool.snapshot();
    const now = Date.now();
    const rate = ((s.sent - last.sent) * 1000) / Math.max(1, now - last.at);
    last = { sent: s.sent, at: now };
    const rss = Math.round(process.memoryUsage().rss / 1048576);
    console.log(
      `[fleet-sim] ${phase} t=${Math.round((now - t0) / 1000)}s ${prod} connected=${s.connected}/${s.devices} errors=${s.connectErrors} ` +
        `sent=${s.sent} (${rate.toFixed(0)}/s) received=${s.received} acks=${s.acks} records=${s.records} reconnects=${Math.max(0, s.connects - s.devices)} rss=${rss}MB`,
    );
  };
  const statusTimer = setInterval(() => status('running'), (num(values, 'status-every', 5) ?? 5) * 1000);

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) {
      console.log(`[fleet-sim] ${signal} again: exiting now`);
      process.exit(130);
    }
    stopping = true;
    console.log(`[fleet-sim] ${signal}: stopping ${pool.size} devices (publishing offline, disconnecting); press Ctrl-C again to quit at once`);
    clearInterval(statusTimer);
    await pool.stop();
    status('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));

  console.log(
    `[fleet-sim] starting ${deviceIds.length} ${prod} devices (${deviceIds[0]}..${deviceIds[deviceIds.length - 1]}) on ${values.broker} at speed ${clock.speed}, simulated clock from ${new Date(clock.origin).toISOString()}`,
  );
  const result = await pool.start();
  console.log(`[fleet-sim] connected ${result.connected}/${deviceIds.length} in ${(result.elapsedMs / 1000).toFixed(1)}s; ${result.failed} failed${result.errors.length ? ` (e.g. ${result.errors[0]})` : ''}`);
  if (result.connected === 0 && deviceIds.length > 0) {
    clearInterval(statusTimer);
    await pool.stop();
    throw new Error('no device could connect; are they provisioned with this root secret and product, and is the broker URL right?');
  }
  status('running');
}

async function provision(values: Values): Promise<void> {
  const gateway = values.gateway;
  const key = values.key ?? process.env.FLEET_API_KEY;
  const rootSecret = values['root-secret'];
  if (!gateway || !key || !rootSecret) throw new UsageError('provision needs --gateway URL, --key KEY (or FLEET_API_KEY) and --root-secret S');
  const prod = product(values);
  let created = 0;
  let existing = 0;
  for (const id of ids(values)) {
    const body: Record<string, unknown> = { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: rootSecret, product: prod };
    if (values.org) body.org = values.org;
    if (values['name-prefix']) body.name = `${values['name-prefix']}${id}`;
    const res = await fetch(`${gateway.replace(/\/$/, '')}/v1/devices/${id}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (res.status === 201) created++;
    else if (res.status === 409) existing++;
    else if (res.status === 429) {
      const wait = Number(res.headers.get('retry-after') ?? '1');
      console.error(`${id}: 429, waiting ${wait}s`);
      await new Promise((r) => setTimeout(r, wait * 1000));
      continue;
    } else throw new Error(`${id}: HTTP ${res.status} ${await res.text()}`);
  }
  console.log(JSON.stringify({ created, already_present: existing }));
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv);
  const command = positionals[0] ?? 'run';
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  switch (command) {
    case 'run':
      return run(values);
    case 'ids':
      process.stdout.write(ids(values).map((id) => `${id}\n`).join(''));
      return;
    case 'password': {
      const secret = values['root-secret'];
      if (!secret) throw new UsageError('--root-secret S is needed');
      const prod = product(values);
      process.stdout.write(ids(values).map((id) => `${id} ${deriveBrokerPassword(secret, id, prod)}\n`).join(''));
      return;
    }
    case 'provision':
      return provision(values);
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

main(process.argv.slice(2)).catch((err) => {
  if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    process.stderr.write(`fleet-sim: ${(err as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
  process.stderr.write(`fleet-sim: ${(err as Error).message}\n`);
  process.exit(1);
});
