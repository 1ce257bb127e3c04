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
  // An empty page's bookmark, read before the page: ids are handed out in commit order (see
  // appendFeedRows), so a row that commits after this read has a higher id and is on a later page.
  // Read after the page, it could be the id of a row that committed in between, never shown.
  const emptyPageBookmark = 'afterId' in from ? from.afterId : await feedHighWater(deps.db, deviceId);
  const rows = await readFeed(deps.db, deviceId, from, limit);
  const page = rows.slice(0, limit);
  const bookmark = page[page.length - 1]?.id ?? emptyPageBookmark;
  return {
    status: 200,
    body: { rows: page.map(feedRowView), has_more: rows.length > limit, next_cursor: encodeFeedCursor(bookmark), server_now: serverNow.toISOString() },
  };
}
