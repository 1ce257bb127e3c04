import { optionalTimeParam, type HandlerResult, type RequestOf } from '@fleet/service-kit';
import { decodeFeedCursor, encodeFeedCursor, FEED_DEFAULT_LIMIT, FEED_DEFAULT_WINDOW_MS, feedRowView } from '../domain/feed';
import { feedHighWater, readFeed } from '../store/responses';
import { deviceOf } from './commands';
import type { SystemDeps } from './deps';

/** GET /v1/devices/{device_id}/system/responses: acknowledgements and log lines, oldest first. */
export async function listResponses(deps: SystemDeps, req: RequestOf<'system.response.list'>): Promise<HandlerResult> {
  const { deviceId } = deviceOf(req);
  const query = req.query as { cursor?: string; since?: string; limit?: number | string };
  const limit = query.limit === undefined ? FEED_DEFAULT_LIMIT : Number(query.limit);
  const serverNow = new Date();
  // `since` is checked even beside a cursor (which wins): a bad value is 400 either way.
  const since = optionalTimeParam(query.since, 'since');
  const from: { afterId: bigint } | { since: Date } =
    query.cursor !== undefined ? { afterId: decodeFeedCursor(query.cursor) } : { since: since ?? new Date(serverNow.getTime() - FEED_DEFAULT_WINDOW_MS) };
  const rows = await readFeed(deps.db, deviceId, from, limit);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  let bookmark: bigint;
  if (last) bookmark = last.id;
  else if ('afterId' in from) bookmark = from.afterId;
  else bookmark = await feedHighWater(deps.db, deviceId);
  return {
    status: 200,
    body: { rows: page.map(feedRowView), has_more: rows.length > limit, next_cursor: encodeFeedCursor(bookmark), server_now: serverNow.toISOString() },
  };
}
