import { encodeCursor, MAX_LIMIT } from './query';

/**
 * The partner events the meter publishes (proto-schemas/events/partner-event-types.json):
 * `meter.records_stored`, `meter.sample_settled`, `meter.energy_reset_settled`. Pure: what an
 * event says; the store writes them to the outbox in the transaction of their change.
 */

/**
 * Most records one `meter.records_stored` event announces: its `count` is the `limit` a partner
 * sends with its cursor, and a page holds at most MAX_LIMIT records. A device with more new
 * records in one batch (a meter catching up after days offline) gets one event per MAX_LIMIT.
 */
export const RECORDS_PER_EVENT = MAX_LIMIT;

/**
 * `data` of `meter.records_stored`: `count` records newly stored for the device, and `cursor`,
 * an arrival bookmark (epoch, arrival sequence `after`) just before the first of them, so
 * `GET .../intervals?cursor=<cursor>&limit=<count>` lists exactly those records.
 */
export function recordsStoredData(deviceId: string, epoch: string, after: number, count: number): { count: number; cursor: string } {
  return { count, cursor: encodeCursor({ m: 'r', d: deviceId, ep: epoch, a: after }) };
}
