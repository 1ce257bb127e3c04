import { SAMPLE_INTERVAL_S, SAMPLE_TIMEOUT_S, type LiveReading } from '../domain/requests';
import type { MeterDb } from './prisma';

/** Live-reading (sample) and energy-reset requests, shared by every replica through Postgres. */

/**
 * Takes the meter's sample slot when the last request is at least 10 s old (one statement, so
 * replicas cannot both take it). Returns the request time, or the seconds to wait.
 */
export async function takeSampleSlot(db: MeterDb, deviceId: string): Promise<{ requestedAt: Date } | { retryAfterS: number }> {
  const taken = await db.$queryRawUnsafe<Array<{ requested_at: Date }>>(
    `INSERT INTO sample_slots (device_id, requested_at) VALUES ($1, clock_timestamp())
       ON CONFLICT (device_id) DO UPDATE SET requested_at = EXCLUDED.requested_at
       WHERE sample_slots.requested_at <= EXCLUDED.requested_at - make_interval(secs => $2)
     RETURNING requested_at`,
    deviceId,
    SAMPLE_INTERVAL_S,
  );
  if (taken[0]) return { requestedAt: taken[0].requested_at };
  const rows = await db.$queryRawUnsafe<Array<{ wait: number }>>(
    `SELECT EXTRACT(EPOCH FROM (requested_at + make_interval(secs => $2) - clock_timestamp()))::float8 AS wait FROM sample_slots WHERE device_id = $1`,
    deviceId,
    SAMPLE_INTERVAL_S,
  );
  return { retryAfterS: Math.max(1, Math.ceil(rows[0]?.wait ?? 1)) };
}

/** Gives the slot back (the request could not be sent). */
export async function releaseSampleSlot(db: MeterDb, deviceId: string, requestedAt: Date): Promise<void> {
  await db.sampleSlot.deleteMany({ where: { deviceId, requestedAt } });
}

export async function createSample(db: MeterDb, token: string, deviceId: string, requestedAt: Date): Promise<void> {
  await db.sampleRequest.create({
    data: { token, deviceId, state: 'pending', requestedAt, deadlineAt: new Date(requestedAt.getTime() + SAMPLE_TIMEOUT_S * 1000) },
  });
}

export async function deleteSample(db: MeterDb, token: string): Promise<void> {
  await db.sampleRequest.deleteMany({ where: { token } });
}

export interface SampleView {
  device_id: string;
  token: string;
  state: string;
  reason: string | null;
  requested_at: string;
  reading: LiveReading | null;
}

/** A sample request of this device; a pending one past its deadline becomes no_reply. */
export async function readSample(db: MeterDb, deviceId: string, token: string, now = new Date()): Promise<SampleView | null> {
  let row = await db.sampleRequest.findFirst({ where: { token, deviceId } });
  if (!row) return null;
  if (row.state === 'pending' && row.deadlineAt.getTime() < now.getTime()) {
    await db.sampleRequest.updateMany({ where: { token, state: 'pending' }, data: { state: 'no_reply', finishedAt: now } });
    row = (await db.sampleRequest.findFirst({ where: { token, deviceId } })) ?? row;
  }
  return {
    device_id: row.deviceId,
    token: row.token,
    state: row.state,
    reason: row.reason,
    requested_at: row.requestedAt.toISOString(),
    reading: (row.reading as LiveReading | null) ?? null,
  };
}

export async function sampleRequestedAt(db: MeterDb, deviceId: string, token: string): Promise<Date | undefined> {
  const row = await db.sampleRequest.findFirst({ where: { token, deviceId }, select: { requestedAt: true } });
  return row?.requestedAt;
}

/** Settles a pending sample (answer or refusal) if it is still inside its deadline. */
export async function settleSample(
  db: MeterDb,
  deviceId: string,
  token: string,
  outcome: { state: 'done'; reading: LiveReading } | { state: 'failed'; reason: string },
  at: Date,
): Promise<boolean> {
  const result = await db.sampleRequest.updateMany({
    where: { token, deviceId, state: 'pending', deadlineAt: { gte: at } },
    data: outcome.state === 'done' ? { state: 'done', reading: outcome.reading as object, finishedAt: at } : { state: 'failed', reason: outcome.reason, finishedAt: at },
  });
  return result.count > 0;
}

export async function createReset(db: MeterDb, token: string, deviceId: string, requestedAt: Date): Promise<void> {
  await db.resetRequest.create({ data: { token, deviceId, state: 'pending', requestedAt } });
}

export async function deleteReset(db: MeterDb, token: string): Promise<void> {
  await db.resetRequest.deleteMany({ where: { token } });
}

export async function readReset(db: MeterDb, deviceId: string, token: string): Promise<Record<string, unknown> | null> {
  const row = await db.resetRequest.findFirst({ where: { token, deviceId } });
  if (!row) return null;
  const pending = row.state === 'pending';
  return {
    device_id: row.deviceId,
    token: row.token,
    state: row.state,
    result: pending ? null : row.result,
    reason: row.reason,
    at: row.at ? row.at.toISOString() : null,
    requested_at: row.requestedAt.toISOString(),
    unmatched_rejection: row.unmatchedRejection ?? null,
  };
}

const RESET_STATE: Record<string, string> = { ok: 'done', duplicate: 'duplicate', failed: 'failed' };

/** A `resetenergy>token=<t>>...` acknowledgement settles that request. */
export async function settleReset(db: MeterDb, deviceId: string, token: string, result: string, reason: string | null, at: Date): Promise<boolean> {
  const state = RESET_STATE[result];
  if (!state) return false;
  const updated = await db.resetRequest.updateMany({ where: { token, deviceId, state: 'pending' }, data: { state, result, reason, at } });
  return updated.count > 0;
}

/** A `resetenergy>>failed:<reason>` (the meter could not read the token) is noted on every pending reset of the device. */
export async function noteUnmatchedRejection(db: MeterDb, deviceId: string, reason: string | null, at: Date): Promise<number> {
  const updated = await db.resetRequest.updateMany({
    where: { deviceId, state: 'pending', requestedAt: { lte: at } },
    data: { unmatchedRejection: { reason, at: at.toISOString() } },
  });
  return updated.count;
}
