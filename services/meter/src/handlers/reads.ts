import type { RequestEnvelope } from '@fleet/contracts';
import { JsonBody, NotFoundError, ValidationError, type HandlerResult } from '@fleet/service-kit';
import { bucketsFor, energyTotal, parseBucket, parseZone } from '../domain/energy';
import { writeEnergyAnswer } from '../domain/energy-answer';
import { encodeCursor, planIntervals, resolveWindow, type StartKey } from '../domain/query';
import { writeRecordPage } from '../domain/record-page';
import { finishQuantity, QUANTITIES } from '../domain/summary';
import type { MeterDb, MeterReader } from '../store/prisma';
import { listByArrival, listByStart, listUnknownTime } from '../store/records';
import { energyByBucket, summarySums } from '../store/rollups';

/** The meter this request is about: the gateway resolved it within the partner's scope; a light is 404. */
export function meterOf(req: RequestEnvelope): string {
  const device = req.device;
  if (!device || device.product !== 'meter' || device.device_id !== (req.params.device_id ?? device.device_id)) {
    throw new NotFoundError('Device not found.');
  }
  return device.device_id;
}

/**
 * `db` is the primary; `readDb` (DATABASE_READ_URL, default the primary) serves what a replica's
 * lag cannot make wrong: pages by start time. Arrival pages stay on the primary: a bookmark
 * answered by one copy must never be past what the next answering copy has committed.
 */
export async function listIntervals(db: MeterDb, req: RequestEnvelope, now = new Date(), readDb: MeterReader = db): Promise<HandlerResult> {
  const deviceId = meterOf(req);
  const plan = planIntervals(req.query as Record<string, unknown>, deviceId, now);
  if (plan.mode === 'received') {
    const from = plan.afterArrival !== null ? { afterArrival: plan.afterArrival } : { receivedSince: plan.receivedSince as Date };
    const { records, epoch, hwm } = await listByArrival(db, deviceId, from, plan.limit);
    if (plan.afterArrival !== null && (plan.epoch !== epoch || plan.afterArrival > hwm)) {
      throw new ValidationError("invalid 'cursor': it predates a database restore; restart from 'received_since' and de-duplicate by sid and seq");
    }
    const page = writeRecordPage(records, plan.limit, {
      before: { device_id: deviceId, mode: 'received', received_since: plan.receivedSince ? plan.receivedSince.toISOString() : null },
      // The bookmark: the last record returned, else where the caller already was, else everything stored so far.
      after: ({ hasMore, last }) => ({
        has_more: hasMore,
        next_cursor: encodeCursor({ m: 'r', d: deviceId, ep: epoch, a: last ? last.arrival : (plan.afterArrival ?? hwm) }),
      }),
    });
    return { body: JsonBody.ofBytes(page.body) };
  }
  const records = plan.unknownTime
    ? await listUnknownTime(readDb, deviceId, plan.after, plan.limit)
    : await listByStart(readDb, deviceId, plan.window, plan.after, plan.limit);
  const { window } = plan;
  const page = writeRecordPage(records, plan.limit, {
    before: { device_id: deviceId, unknown_time: plan.unknownTime, window: { start: window.start.toISOString(), end: window.end.toISOString() } },
    after: ({ hasMore, last }) => {
      const key: StartKey | null = last ? [last.startMs, last.sid, last.seq] : null;
      return {
        has_more: hasMore,
        next_cursor:
          hasMore && key ? encodeCursor({ m: 's', d: deviceId, s: window.start.getTime(), e: window.end.getTime(), u: plan.unknownTime, k: key }) : null,
      };
    },
  });
  return { body: JsonBody.ofBytes(page.body) };
}

const SUMMARY_PARAMS = ['start', 'end'];
const ENERGY_PARAMS = ['start', 'end', 'bucket', 'tz'];

function onlyParams(query: Record<string, unknown>, allowed: string[]): void {
  const extra = Object.keys(query).find((k) => !allowed.includes(k));
  if (extra) throw new ValidationError(`unknown query parameter '${extra}'`);
}

export async function getSummary(db: MeterReader, req: RequestEnvelope, now = new Date()): Promise<HandlerResult> {
  const deviceId = meterOf(req);
  const query = req.query as Record<string, unknown>;
  onlyParams(query, SUMMARY_PARAMS);
  const window = resolveWindow(query, now, 'one year', 'range (a summary covers at most one year)');
  const sums = await summarySums(db, deviceId, window);
  const body: Record<string, unknown> = {
    device_id: deviceId,
    window: { start: window.start.toISOString(), end: window.end.toISOString() },
    coverage: { records: sums.records, quarantined: sums.quarantined, seconds: sums.seconds },
  };
  for (const q of QUANTITIES) body[q] = finishQuantity(sums.quantities[q]);
  const total = energyTotal(sums.energy, 0);
  body.energy_wh = total ? { total: total.energy_wh, resets: total.resets, intervals: total.intervals } : null;
  return { body };
}

export async function getEnergy(db: MeterReader, req: RequestEnvelope, now = new Date()): Promise<HandlerResult> {
  const deviceId = meterOf(req);
  const query = req.query as Record<string, unknown>;
  onlyParams(query, ENERGY_PARAMS);
  const bucket = parseBucket(query.bucket);
  const tz = parseZone(query.tz);
  // No cap beyond the bucket count: a window needing 2000 or more buckets is refused.
  const window = resolveWindow(query, now, Number.MAX_SAFE_INTEGER);
  const buckets = bucketsFor(window.start, window.end, bucket, tz);
  const boundaries = [...buckets.map((b) => b.start), (buckets.at(-1) as { end: number }).end];
  const { buckets: sums, total } = await energyByBucket(db, deviceId, window, boundaries);
  const before = { device_id: deviceId, bucket, window: { start: window.start.toISOString(), end: window.end.toISOString() } };
  const after: Record<string, unknown> = { total: energyTotal(total, buckets.length) };
  if (tz) after.tz = tz;
  return { body: JsonBody.ofBytes(writeEnergyAnswer(before, buckets, sums, after)) };
}
