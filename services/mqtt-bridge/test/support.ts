import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { connect, JSONCodec, type NatsConnection } from 'nats';
import { ServiceRuntime } from '@fleet/service-kit';
import { checkReplyEnvelope, type ReplyEnvelope } from '@fleet/contracts';
import { startDynsecBroker, type DynsecBroker } from '@fleet/launcher';
import { testEnv, uniqueId } from '@fleet/test-kit';
import { startBridge, type Bridge } from '../src/bridge';
import { readBridgeConfig, type BridgeConfig } from '../src/config';

export type { DynsecBroker };

/** A dynamic-security broker on a free port in its own temp dir, removed by stop(). */
export async function startBroker(): Promise<DynsecBroker> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bridge-broker-'));
  const broker = await startDynsecBroker({ dataDir, adminUsername: 'fleet-admin', adminPassword: uniqueId('pw') });
  return {
    ...broker,
    stop: async () => {
      await broker.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Names that isolate one test file on the shared NATS server. */
export function isolation(): { prefix: string; deviceIn: string; deviceEvents: string } {
  const id = uniqueId('t');
  return { prefix: `${id}.`, deviceIn: `DEVICE_IN_${id}`, deviceEvents: `DEVICE_EVENTS_${id}` };
}

export function bridgeEnv(broker: DynsecBroker, names: ReturnType<typeof isolation>, extra: Record<string, string> = {}): Record<string, string> {
  return {
    NATS_URL: testEnv.natsUrl,
    HEALTH_PORT: '0',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    MQTT_URL: broker.url,
    MQTT_ADMIN_USERNAME: broker.adminUsername,
    MQTT_ADMIN_PASSWORD: broker.adminPassword,
    MQTT_SHARE_GROUP: 'fleet-bridge',
    SERVICE_INSTANCE: uniqueId('r'),
    SUBJECT_PREFIX: names.prefix,
    DEVICE_IN_STREAM: names.deviceIn,
    DEVICE_EVENTS_STREAM: names.deviceEvents,
    CONNECTIVITY_FLUSH_MS: '200',
    ...extra,
  };
}

export interface RunningBridge {
  config: BridgeConfig;
  runtime: ServiceRuntime;
  bridge: Bridge;
  close(): Promise<void>;
}

/** The bridge in this process, as main.ts wires it. */
export async function runBridge(env: Record<string, string>): Promise<RunningBridge> {
  const config = readBridgeConfig(env);
  let bridge: Bridge | undefined;
  const runtime = await ServiceRuntime.start({ service: 'mqtt-bridge', config, subjectPrefix: config.SUBJECT_PREFIX, shutdownGraceMs: 30_000, readiness: { mqtt: () => bridge?.isConnected() ?? false } });
  try {
    bridge = await startBridge(config, runtime);
  } catch (err) {
    await runtime.close();
    throw err;
  }
  // What runtime.ready() does, without taking over the test process's signals.
  runtime.health.markReady();
  return { config, runtime, bridge, close: () => runtime.close() };
}

/** A NATS connection of the test itself. */
export function natsClient(): Promise<NatsConnection> {
  return connect({ servers: testEnv.natsUrl });
}

export function envelope(body: Record<string, unknown>): { request_id: string; params: Record<string, string>; query: Record<string, unknown>; body: Record<string, unknown> } {
  return { request_id: uniqueId('req'), params: {}, query: {}, body };
}

/**
 * One request to the bridge on its wire subject (prefix included), sent as a hand-made caller
 * would: no client-side checks, so what the tests see is the bridge's own answer.
 */
export async function ask(runtime: ServiceRuntime, wireSubject: string, body: Record<string, unknown>, timeoutMs = 10_000): Promise<ReplyEnvelope> {
  const reply = await runtime.bus.connection.request(wireSubject, requestCodec.encode(envelope(body)), { timeout: timeoutMs });
  return checkReplyEnvelope(requestCodec.decode(reply.data));
}

const requestCodec = JSONCodec<unknown>();

/** Connects an MQTT client; resolves on CONNACK or rejects with the broker's refusal. */
export function mqttConnect(url: string, options: IClientOptions): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect(url, { reconnectPeriod: 0, connectTimeout: 5000, ...options });
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
    client.once('close', () => reject(new Error('closed before CONNACK')));
  });
}

/** A device as device-protocol.md says: client id = username = device id, last will offline on <r>/status. */
export function connectDevice(url: string, root: string, deviceId: string, password: string, extra: IClientOptions = {}): Promise<MqttClient> {
  return mqttConnect(url, {
    clientId: deviceId,
    username: deviceId,
    password,
    clean: false,
    keepalive: 60,
    protocolVersion: 4,
    will: { topic: `${root}/${deviceId}/status`, payload: Buffer.from('offline'), qos: 1, retain: true },
    ...extra,
  });
}

export interface StoredMessage {
  subject: string;
  seq: number;
  data: Uint8Array;
  headers: Record<string, string>;
  string(): string;
  json<T>(): T;
}

/** True when a NATS subject matches a filter with * and > wildcards. */
export function subjectMatches(filter: string, subject: string): boolean {
  const f = filter.split('.');
  const s = subject.split('.');
  for (let i = 0; i < f.length; i += 1) {
    if (f[i] === '>') return s.length > i;
    if (i >= s.length || (f[i] !== '*' && f[i] !== s[i])) return false;
  }
  return f.length === s.length;
}

/** Every message a stream holds now on subjects matching the filter, in stream order. */
export async function readStream(nc: NatsConnection, stream: string, filter: string): Promise<StoredMessage[]> {
  const jsm = await nc.jetstreamManager();
  const { state } = await jsm.streams.info(stream);
  const out: StoredMessage[] = [];
  if (state.messages === 0) return out;
  for (let seq = state.first_seq; seq <= state.last_seq; seq += 1) {
    const m = await jsm.streams.getMessage(stream, { seq }).catch(() => undefined);
    if (!m || !subjectMatches(filter, m.subject)) continue;
    const headers: Record<string, string> = {};
    for (const [k, v] of m.header ?? []) headers[k] = v[0] ?? '';
    const data = m.data;
    out.push({ subject: m.subject, seq, data, headers, string: () => Buffer.from(data).toString('utf8'), json: <T>() => JSON.parse(Buffer.from(data).toString('utf8')) as T });
  }
  return out;
}

export async function deleteStreams(nc: NatsConnection, ...names: string[]): Promise<void> {
  const jsm = await nc.jetstreamManager();
  for (const name of names) await jsm.streams.delete(name).catch(() => undefined);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
