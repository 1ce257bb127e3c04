/**
 * A sensor reading a light relays on `<r>/tdl/<tdl_id>` (device protocol):
 * `{"temp_c": number or null, "humidity": number or null, "breach": boolean, "at": epoch seconds}`.
 * Pure: anything else is refused with a reason, never thrown at the consumer.
 */
import { levelsAfterDevice } from '@fleet/device-protocol';
import { isSensorId } from './sensor-id';

export interface Reading {
  deviceId: string;
  tdlId: string;
  at: Date;
  tempC: number | null;
  humidity: number | null;
  breach: boolean;
  receivedAt: Date;
}

/** Readings dated before 2000 or more than a day ahead of arrival are a device clock gone wrong. */
const EARLIEST_S = 946_684_800;
const AHEAD_S = 86_400;

export type ParsedReading = { ok: true; reading: Reading } | { ok: false; reason: string };

const nullableNumber = (v: unknown): v is number | null => v === null || (typeof v === 'number' && Number.isFinite(v));

/** The sensor id from the MQTT topic `<root>/<device_id>/tdl/<tdl_id>` (a root of any depth). */
export function sensorIdOfTopic(topic: string, deviceId: string): string | undefined {
  const levels = levelsAfterDevice(topic, deviceId);
  if (levels?.length !== 2 || levels[0] !== 'tdl') return undefined;
  return isSensorId(levels[1]) ? levels[1] : undefined;
}

export function parseReading(deviceId: string, topic: string, payload: Uint8Array, receivedAt: Date): ParsedReading {
  const tdlId = sensorIdOfTopic(topic, deviceId);
  if (!tdlId) return { ok: false, reason: 'topic is not <root>/<device_id>/tdl/<tdl_id> with a valid sensor id' };
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch {
    return { ok: false, reason: 'payload is not JSON' };
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return { ok: false, reason: 'payload is not a JSON object' };
  const r = doc as Record<string, unknown>;
  if (!nullableNumber(r.temp_c)) return { ok: false, reason: 'temp_c is not a number or null' };
  if (!nullableNumber(r.humidity)) return { ok: false, reason: 'humidity is not a number or null' };
  if (typeof r.breach !== 'boolean') return { ok: false, reason: 'breach is not a boolean' };
  if (typeof r.at !== 'number' || !Number.isFinite(r.at)) return { ok: false, reason: 'at is not epoch seconds' };
  if (r.at < EARLIEST_S || r.at > receivedAt.getTime() / 1000 + AHEAD_S) return { ok: false, reason: 'at is outside the plausible range' };
  // A reading dated after it arrived (a device clock ahead) is taken as of its arrival: dated
  // ahead, it would stay the sensor's newest until that time came, whatever came after it.
  const atMs = Math.min(Math.round(r.at * 1000), receivedAt.getTime());
  return { ok: true, reading: { deviceId, tdlId, at: new Date(atMs), tempC: r.temp_c, humidity: r.humidity, breach: r.breach, receivedAt } };
}
