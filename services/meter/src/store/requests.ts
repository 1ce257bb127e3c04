import { transactionBy, type CommitWindow } from '@fleet/db';
import { recordPartnerEvents } from '@fleet/service-kit';
import { SAMPLE_INTERVAL_S, SAMPLE_TIMEOUT_S, type LiveReading } from '../domain/requests';
import type { MeterDb, MeterTx } from './prisma';

/**
 * Live-reading (sample) and energy-reset requests, shared by every replica through Postgres.
 * Every settlement (a pending request becoming done, failed, no_reply or duplicate) writes its
 * partner event to the outbox in the same transaction.
 */

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

/** A live-reading request as GET .../sample/{token} answers it (and `meter.sample_settled` carries it). */
export type SampleView = {
  device_id: string;
  token: string;
  state: string;
  reason: string | null;
  requested_at: string;
  reading: LiveReading | null;
};

/** The columns a sample request is read and settled with (view and event from the same row). */
const SAMPLE_COLUMNS = 'device_id, token, state, reason, requested_at, reading, finished_at';

interface SampleRow {
  device_id: string;
  token: string;
  state: string;
  reason: string | null;
  requested_at: Date;
  reading: LiveReading | null;
  finished_at: Date | null;
}

export function sampleView(row: SampleRow): SampleView {
  return {
    device_id: row.device_id,
    token: row.token,
    state: row.state,
    reason: row.reason,
    requested_at: row.requested_at.toISOString(),
    reading: row.reading ?? null,
  };
}

/**
 * `meter.sample_settled` for each request the statement just settled, in its transaction: the
 * request as GET answers it, at its settlement time. A settlement is an UPDATE of a pending
 * request (`state = 'pending'` in its WHERE): of concurrent ones (a live answer, the sweep, a
 * read past the deadline, on any replica) exactly one changes the row and returns it, so each
 * settlement has exactly one event, and a redelivered answer changes nothing and has none.
 */
async function sampleSettledEvents(tx: MeterTx, rows: SampleRow[]): Promise<void> {
  await recordPartnerEvents(
    tx,
    rows.map((row) => ({ type: 'meter.sample_settled' as const, deviceId: row.device_id, data: sampleView(row), occurredAt: row.finished_at ?? new Date() })),
  );
}

/**
 * A sample request of this device. A pending one past its deadline is settled no_reply here
 * (with its event), committed only until the request's deadline (`window`), so the outcome a
 * reader saw is final: an answer that arrives later is ignored. `settled`: this read settled it
 * (its event is in the outbox).
 */
export async function readSample(
  db: MeterDb,
  deviceId: string,
  token: string,
  window: number | CommitWindow,
  now = new Date(),
): Promise<{ view: SampleView; settled: boolean } | null> {
  const find = async () =>
    (await db.$queryRawUnsafe<SampleRow[]>(`SELECT ${SAMPLE_COLUMNS}, deadline_at FROM sample_requests WHERE token = $1 AND device_id = $2`, token, deviceId))[0] as
      | (SampleRow & { deadline_at: Date })
      | undefined;
  const row = await find();
  if (!row) return null;
  if (row.state !== 'pending' || row.deadline_at.getTime() >= now.getTime()) return { view: sampleView(row), settled: false };
  const [settled] = await transactionBy(db, window, async (tx) => {
    const rows = await tx.$queryRawUnsafe<SampleRow[]>(
      `UPDATE sample_requests SET state = 'no_reply', finished_at = $3::timestamptz
        WHERE token = $1 AND device_id = $2 AND state = 'pending' AND deadline_at < $3::timestamptz
       RETURNING ${SAMPLE_COLUMNS}`,
      token,
      deviceId,
      now,
    );
    await sampleSettledEvents(tx, rows);
    return rows;
  });
  // Settled meanwhile by someone else (the sweep, another replica): as it is now.
  return { view: sampleView(settled ?? (await find()) ?? row), settled: settled !== undefined };
}

/** Pending sample requests waiting for the sweep at `now`: the sweep's cheap look before it opens a transaction. */
async function anyExpiredSample(db: MeterDb, now: Date): Promise<boolean> {
  const rows = await db.$queryRawUnsafe<unknown[]>(`SELECT 1 FROM sample_requests WHERE state = 'pending' AND deadline_at < $1::timestamptz LIMIT 1`, now);
  return rows.length > 0;
}

/** Requests the sweep settles per transaction. */
const SWEEP_BATCH = 500;

/**
 * The sweep: every pending sample request past its deadline becomes no_reply, with its
 * `meter.sample_settled`, in one transaction per SWEEP_BATCH, whether or not anyone reads it.
 * Safe on every replica at once: rows another sweep holds are skipped (SKIP LOCKED), and a row
 * settled by anyone is no longer pending. Returns how many it settled.
 */
export async function settleExpiredSamples(db: MeterDb, now = new Date()): Promise<number> {
  let settled = 0;
  while (await anyExpiredSample(db, now)) {
    const rows = await db.$transaction(async (tx) => {
      const updated = await tx.$queryRawUnsafe<SampleRow[]>(
        `UPDATE sample_requests SET state = 'no_reply', finished_at = $1::timestamptz
          WHERE token IN (SELECT token FROM sample_requests WHERE state = 'pending' AND deadline_at < $1::timestamptz
                           ORDER BY deadline_at LIMIT $2::int FOR UPDATE SKIP LOCKED)
            AND state = 'pending'
         RETURNING ${SAMPLE_COLUMNS}`,
        now,
        SWEEP_BATCH,
      );
      await sampleSettledEvents(tx, updated);
      return updated;
    });
    settled += rows.length;
    // Nothing left this sweep can take (the rest is held by another replica's sweep).
    if (rows.length < SWEEP_BATCH) break;
  }
  return settled;
}

export async function sampleRequestedAt(db: MeterDb, deviceId: string, token: string): Promise<Date | undefined> {
  const row = await db.sampleRequest.findFirst({ where: { token, deviceId }, select: { requestedAt: true } });
  return row?.requestedAt;
}

/**
 * Settles a pending sample (answer or refusal) if it is still inside its deadline, with its
 * `meter.sample_settled` in the same transaction. True when this call settled it.
 */
export async function settleSample(
  db: MeterDb,
  deviceId: string,
  token: string,
  outcome: { state: 'done'; reading: LiveReading } | { state: 'failed'; reason: string },
  at: Date,
): Promise<boolean> {
  const rows = await db.$transaction(async (tx) => {
    const updated = await tx.$queryRawUnsafe<SampleRow[]>(
      `UPDATE sample_requests SET state = $3, reading = $4::jsonb, reason = $5, finished_at = $6::timestamptz
        WHERE token = $1 AND device_id = $2 AND state = 'pending' AND deadline_at >= $6::timestamptz
       RETURNING ${SAMPLE_COLUMNS}`,
      token,
      deviceId,
      outcome.state,
      outcome.state === 'done' ? JSON.stringify(outcome.reading) : null,
      outcome.state === 'failed' ? outcome.reason : null,
      at,
    );
    await sampleSettledEvents(tx, updated);
    return updated;
  });
  return rows.length > 0;
}

export async function createReset(db: MeterDb, token: string, deviceId: string, requestedAt: Date): Promise<void> {
  await db.resetRequest.create({ data: { token, deviceId, state: 'pending', requestedAt } });
}

export async function deleteReset(db: MeterDb, token: string): Promise<void> {
  await db.resetRequest.deleteMany({ where: { token } });
}

/** The columns a reset request is read and settled with. */
const RESET_COLUMNS = 'device_id, token, state, result, reason, "at", requested_at, unmatched_rejection';

interface ResetRow {
  device_id: string;
  token: string;
  state: string;
  result: string | null;
  reason: string | null;
  at: Date | null;
  requested_at: Date;
  unmatched_rejection: Record<string, unknown> | null;
}

/** An energy reset request as GET .../resetenergy/{token} answers it (and `meter.energy_reset_settled` carries it). */
export function resetView(row: ResetRow): Record<string, unknown> {
  const pending = row.state === 'pending';
  return {
    device_id: row.device_id,
    token: row.token,
    state: row.state,
    result: pending ? null : row.result,
    reason: row.reason,
    at: row.at ? row.at.toISOString() : null,
    requested_at: row.requested_at.toISOString(),
    unmatched_rejection: row.unmatched_rejection ?? null,
  };
}

export async function readReset(db: MeterDb, deviceId: string, token: string): Promise<Record<string, unknown> | null> {
  const [row] = await db.$queryRawUnsafe<ResetRow[]>(`SELECT ${RESET_COLUMNS} FROM reset_requests WHERE token = $1 AND device_id = $2`, token, deviceId);
  return row ? resetView(row) : null;
}

/**
 * The state each acknowledgement result settles a reset in. `unknown` is the protocol's generic
 * answer of a device that does not know the verb: that meter will never reset, so the request
 * fails (reason `unsupported`) instead of staying pending.
 */
const RESET_STATE: Record<string, string> = { ok: 'done', duplicate: 'duplicate', failed: 'failed', unknown: 'failed' };

/**
 * A `resetenergy>token=<t>>...` acknowledgement settles that request, with its
 * `meter.energy_reset_settled` in the same transaction (only a pending request settles, so a
 * repeated acknowledgement changes nothing and has no event). True when this call settled it.
 */
export async function settleReset(db: MeterDb, deviceId: string, token: string, result: string, givenReason: string | null, at: Date): Promise<boolean> {
  const state = RESET_STATE[result];
  if (!state) return false;
  // Only `failed` carries a reason on the wire (parseAcknowledgement).
  const reason = result === 'unknown' ? 'unsupported' : givenReason;
  const rows = await db.$transaction(async (tx) => {
    const updated = await tx.$queryRawUnsafe<ResetRow[]>(
      `UPDATE reset_requests SET state = $3, result = $4, reason = $5, "at" = $6::timestamptz
        WHERE token = $1 AND device_id = $2 AND state = 'pending'
       RETURNING ${RESET_COLUMNS}`,
      token,
      deviceId,
      state,
      result,
      reason,
      at,
    );
    await recordPartnerEvents(
      tx,
      updated.map((row) => ({ type: 'meter.energy_reset_settled' as const, deviceId: row.device_id, data: resetView(row), occurredAt: row.at ?? at })),
    );
    return updated;
  });
  return rows.length > 0;
}

/** A `resetenergy>>failed:<reason>` (the meter could not read the token) is noted on every pending reset of the device. */
export async function noteUnmatchedRejection(db: MeterDb, deviceId: string, reason: string | null, at: Date): Promise<number> {
  const updated = await db.resetRequest.updateMany({
    where: { deviceId, state: 'pending', requestedAt: { lte: at } },
    data: { unmatchedRejection: { reason, at: at.toISOString() } },
  });
  return updated.count;
}
