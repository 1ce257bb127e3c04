import { counter, CountedTimer, histogram } from '@fleet/service-kit';

const answers = new CountedTimer(
  counter('fleet_http_requests_total', 'Requests the gateway answered, by route template, method and status.', ['route', 'method', 'status']),
  histogram('fleet_http_request_duration_seconds', 'From a request arriving to its answer being written, by route template and method.', ['route', 'method']),
);
const refused = counter('fleet_http_limit_refusals_total', 'Requests answered 429, by the limit that refused them.', ['limit']);

/** Limit windows by the prefix of their Redis key (limits/classes.ts, limits/request-window). */
const LIMIT_OF_KEY_PREFIX: Record<string, string> = {
  cmd: 'device_command',
  cmdceil: 'device_command_ceiling',
  cfg: 'config_mutation',
  destr: 'destructive',
};

/** Counts a 429: `key` is the refusing window's key, or undefined for the partner's request window. */
export function countRefusal(key?: string): void {
  refused.inc({ limit: key === undefined ? 'requests' : (LIMIT_OF_KEY_PREFIX[key.split(':')[0] ?? ''] ?? 'other') });
}

/**
 * Counts and times an answer. The route label is the matched route's template (set by the API
 * pipeline in res.locals.routeTemplate), an express route's path (docs), or `unmatched`: never
 * the request's own path, which would make a series per device.
 */
export function countAnswer(route: string, method: string, status: number, seconds: number): void {
  const code = String(status);
  answers.record(`${route} ${method} ${code}`, { route, method, status: code }, { route, method }, seconds);
}
