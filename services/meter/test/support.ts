import { randomBytes } from 'node:crypto';
import type { JetStreamClient } from 'nats';
import type { RequestEnvelope } from '@fleet/contracts';
import { Bus, createLogger, JsonBody, type HandlerResult, type Logger } from '@fleet/service-kit';
import { captureDeviceMessage, createMigratedTestDb, testEnv, uniqueId, type TestDatabase } from '@fleet/test-kit';
import { MIGRATIONS_DIR } from '../src/migrations';
import { openMeterDb, type MeterDb } from '../src/store/prisma';

export const logger: Logger = createLogger('meter-test', 'silent');

export type TestDb = TestDatabase<MeterDb>;

/** A migrated database of this test file's own. */
export const createTestDb = (): Promise<TestDb> => createMigratedTestDb('meter_test_', MIGRATIONS_DIR, (url) => openMeterDb(url, 5));

/** A bus of the test's own; `subjectPrefix` isolates the subjects it serves and calls; `servers` a NATS server of its own (startPrivateNats). */
export async function connectBus(service = 'meter-test', subjectPrefix?: string, servers = testEnv.natsUrl): Promise<Bus> {
  return Bus.connect({ servers, service, logger, requestTimeoutMs: 3000, subjectPrefix });
}

/** A DEVICE_IN-like stream of the test's own. */
export { createDeviceInStream as createStream } from '@fleet/test-kit';

/** Puts a device message into the stream as the bridge does (`levels` dot-separated: `iv`, `sys.resp`). */
export async function deviceSends(js: JetStreamClient, prefix: string, deviceId: string, levels: string, payload: string | object, receivedAt = new Date()): Promise<void> {
  await captureDeviceMessage(js, prefix, { deviceId, product: 'meter', levels: levels.replace(/\./g, '/'), payload, receivedAt });
}

export function envelope(deviceId: string, query: Record<string, unknown> = {}, extra: Partial<RequestEnvelope> = {}, product: 'meter' | 'light' = 'meter'): RequestEnvelope {
  return {
    request_id: uniqueId('r'),
    params: { device_id: deviceId, ...(extra.params ?? {}) },
    query,
    device: { device_id: deviceId, product, org_node_id: 1, name: null },
    ...(extra.body ? { body: extra.body } : {}),
  };
}

export const randomSid = (): string => randomBytes(4).toString('hex');

/** A request's commit window (its deadline) a few seconds away, for handlers that store work. */
export const inTime = (ms = 5_000): { deadline: number } => ({ deadline: Date.now() + ms });

export interface SimRecord {
  sid: string;
  seq: number;
  start: number | null;
  clock: 'synced' | 'free' | 'none';
  dur: number;
  n: number;
  err: number;
  v: [number, number, number] | null;
  i: [number, number, number] | null;
  p: [number, number, number] | null;
  f: [number, number, number] | null;
  pf: [number, number, number] | null;
  e: [number, number] | null;
  ct: number;
  alarms: number;
  partial: boolean;
}

/** A well-formed record: load `w` watts (true), counter from `e0` (raw), CT turns `ct`. */
export function makeRecord(sid: string, seq: number, startS: number, opts: { w?: number; e0?: number; ct?: number; dur?: number } = {}): SimRecord {
  const dur = opts.dur ?? 900;
  const ct = opts.ct ?? 1;
  const w = opts.w ?? 500;
  const raw = w * ct;
  const e0 = opts.e0 ?? 1000;
  const used = Math.round(((raw * (dur - 1)) / 3600) * 1000) / 1000;
  return {
    sid,
    seq,
    start: startS,
    clock: 'synced',
    dur,
    n: dur,
    err: 0,
    v: [230, 228, 232],
    i: [Math.round((raw / 230) * 1000) / 1000, 0, Math.round((raw / 200) * 1000) / 1000],
    p: [raw, raw * 0.5, raw * 1.5],
    f: [50, 49.9, 50.1],
    pf: [0.95, 0.9, 0.99],
    e: [e0, Math.round((e0 + used) * 1000) / 1000],
    ct,
    alarms: 0,
    partial: false,
  };
}

/** A handler's reply body as an object: pages of records come as JSON text (JsonBody). */
export const bodyOf = (r: HandlerResult): Record<string, unknown> => (r.body instanceof JsonBody ? r.body.parse() : r.body) as Record<string, unknown>;
