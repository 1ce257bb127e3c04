import type { StartKey, Window } from '../domain/query';
import { LISTED_RECORD, RECORD_JSON } from '../domain/view';
import { INGEST_LOCK_KEY, type MeterDb, type MeterReader } from './prisma';
import { dropRollups } from './rollups';

/** Reads of interval records (both listing modes) and clears. Summary and energy sums: store/rollups.ts. */

export async function readState(db: MeterDb): Promise<{ epoch: string; hwm: number }> {
  const rows = await db.$queryRawUnsafe<Array<{ epoch: string; arrival_hwm: bigint }>>('SELECT epoch, arrival_hwm FROM meter_state WHERE id = 1');
  const row = rows[0];
  if (!row) throw new Error('meter_state row missing');
  return { epoch: row.epoch, hwm: Number(row.arrival_hwm) };
}

/**
 * A page's text: a JSON array of its records' field arrays (RECORD_JSON), in `order`. Postgres
 * writes the page as one text, so reading it costs one value however many records it holds;
 * domain/record-page.ts writes the answer from it.
 */
export type RecordArraysText = string;

async function readPage(db: MeterReader, where: string, order: string, limitParam: string, params: unknown[]): Promise<RecordArraysText> {
  const rows = await db.$queryRawUnsafe<Array<{ page: string | null }>>(
    `SELECT concat('[', string_agg(record, ',' ORDER BY ${order}), ']') AS page FROM (
       SELECT ${RECORD_JSON} AS record, ${order} FROM interval_records WHERE ${where} ORDER BY ${order} LIMIT ${limitParam}
     ) page`,
    ...params,
  );
  return rows[0]?.page ?? '[]';
}

/**
 * Records by start time, oldest first by (start, sid, seq), after the key; limit + 1 records to
 * tell has_more. (A record without identity, LISTED_RECORD, has no start: none is in a window.)
 */
export async function listByStart(db: MeterReader, deviceId: string, window: Window, after: StartKey | null, limit: number): Promise<RecordArraysText> {
  const params: unknown[] = [deviceId, window.start, window.end, limit + 1];
  let keyClause = '';
  if (after) {
    params.push(new Date(after[0] ?? 0), after[1], after[2]);
    keyClause = 'AND (start_at, sid, seq) > ($5::timestamptz, $6::text, $7::bigint)';
  }
  return readPage(db, `device_id = $1 AND NOT cleared AND start_at >= $2 AND start_at < $3 ${keyClause}`, 'start_at, sid, seq', '$4', params);
}

/** Records without a determinable start, by (sid, seq); only those with an identity (LISTED_RECORD). */
export async function listUnknownTime(db: MeterReader, deviceId: string, after: StartKey | null, limit: number): Promise<RecordArraysText> {
  const params: unknown[] = [deviceId, limit + 1];
  let keyClause = '';
  if (after) {
    params.push(after[1], after[2]);
    keyClause = 'AND (sid, seq) > ($3::text, $4::bigint)';
  }
  return readPage(db, `device_id = $1 AND NOT cleared AND start_at IS NULL AND ${LISTED_RECORD} ${keyClause}`, 'sid, seq', '$2', params);
}

/**
 * Records in arrival order after a bookmark (or received since a time), never past the
 * committed high-water mark read in the same transaction. Records without identity
 * (LISTED_RECORD) are passed over: a page that holds none of the others keeps the bookmark.
 */
export async function listByArrival(
  db: MeterDb,
  deviceId: string,
  from: { afterArrival: number } | { receivedSince: Date },
  limit: number,
): Promise<{ records: RecordArraysText; epoch: string; hwm: number }> {
  return db.$transaction(async (tx) => {
    const state = await tx.$queryRawUnsafe<Array<{ epoch: string; arrival_hwm: bigint }>>('SELECT epoch, arrival_hwm FROM meter_state WHERE id = 1');
    const epoch = state[0]?.epoch ?? '';
    const hwm = Number(state[0]?.arrival_hwm ?? 0);
    const records =
      'afterArrival' in from
        ? await readPage(tx, `device_id = $1 AND NOT cleared AND ${LISTED_RECORD} AND arrival_seq > $2 AND arrival_seq <= $3`, 'arrival_seq', '$4', [deviceId, from.afterArrival, hwm, limit + 1])
        : await readPage(tx, `device_id = $1 AND NOT cleared AND ${LISTED_RECORD} AND received_at >= $2 AND arrival_seq <= $3`, 'arrival_seq', '$4', [deviceId, from.receivedSince, hwm, limit + 1]);
    return { records, epoch, hwm };
  }, { isolationLevel: 'RepeatableRead' });
}

/**
 * Clears a meter after testing: every record received so far stops being listed, and records
 * from before the clear are not stored if they arrive later (see MeterClear and
 * domain/clears.ts). Holds the ingest lock so no batch interleaves.
 */
export async function clearDevice(db: MeterDb, deviceId: string, now = new Date()): Promise<{ cleared_records: number; cleared_at: string }> {
  return db.$transaction(async (tx) => {
    await tx.$queryRawUnsafe('SELECT 1 AS locked FROM pg_advisory_xact_lock($1::bigint)', INGEST_LOCK_KEY);
    const count = await tx.$executeRawUnsafe('UPDATE interval_records SET cleared = true WHERE device_id = $1 AND NOT cleared', deviceId);
    await dropRollups(tx, deviceId);
    // Marks in the meter's own terms, over every record of the device (earlier clears included).
    const streams = await tx.$queryRawUnsafe<Array<{ sid: string; max_seq: bigint }>>(
      "SELECT sid, max(seq) AS max_seq FROM interval_records WHERE device_id = $1 AND sid NOT LIKE '#%' GROUP BY sid",
      deviceId,
    );
    // The newest start only among records the platform accepted: a quarantined record keeps the
    // start it named (one far in the future, or one on a record refused for another reason), and
    // such a start would mark every record the meter makes after the clear as from before it.
    const latest = await tx.$queryRawUnsafe<Array<{ max_start: Date | null }>>(
      'SELECT max(start_at) AS max_start FROM interval_records WHERE device_id = $1 AND NOT quarantined',
      deviceId,
    );
    // The meter's clock at the clear, from the newest accepted record that says when it ended:
    // it was sent at its end, so its end minus its arrival is how far the meter's clock is ahead.
    const newest = await tx.$queryRawUnsafe<Array<{ ended_at: Date; received_at: Date }>>(
      `SELECT start_at + make_interval(secs => duration_s) AS ended_at, received_at FROM interval_records
        WHERE device_id = $1 AND NOT quarantined AND start_at IS NOT NULL AND duration_s IS NOT NULL
        ORDER BY start_at DESC LIMIT 1`,
      deviceId,
    );
    const ahead = newest[0] ? newest[0].ended_at.getTime() - newest[0].received_at.getTime() : null;
    await tx.meterClear.create({
      data: {
        deviceId,
        clearedAt: now,
        records: count,
        streams: Object.fromEntries(streams.map((s) => [s.sid, Number(s.max_seq)])),
        maxStartAt: latest[0]?.max_start ?? null,
        meterClockAtClear: ahead === null ? null : new Date(now.getTime() + ahead),
      },
    });
    return { cleared_records: count, cleared_at: now.toISOString() };
  });
}
