import { CHANNELS, type Permission, type Principal } from '@fleet/contracts';
import { ForbiddenError } from '@fleet/service-kit';
import type { RouteDef } from '../routes/types';

/** The route's permission; with a list, any one of them (the 403 names the first). */
export function checkPermission(route: RouteDef, principal: Principal): void {
  if (route.permission === null) return;
  const admitting = typeof route.permission === 'string' ? [route.permission] : route.permission;
  if (admitting.some((p) => principal.permissions.includes(p))) return;
  const first = admitting[0] as Permission;
  const text = admitting.length === 1 ? `the '${first}' permission` : `one of the permissions ${admitting.map((p) => `'${p}'`).join(', ')}`;
  throw new ForbiddenError(`This route needs ${text}.`, 'forbidden', first);
}

/**
 * Whether the principal may make this request, checked ahead of every other check of it (the
 * spec: permissions are checked before the rest of the request; only an idempotent replay is
 * not checked again). A tiered route (`tierOf`) needs the permission of the request's own tier,
 * read from the path or, when the body reads as JSON, from the body; its 403 names that
 * permission, so granting what the answer names is what lets the request through. Where no tier
 * can be read yet (no JSON body, an unknown verb), any of the route's permissions admits the
 * request to the checks that refuse such a body.
 */
export function checkAccess(route: RouteDef, principal: Principal, params: Record<string, string>, rawBody: Buffer): void {
  // The body is parsed here only for a route that reads its tier or its channel from it.
  const body = route.tierOf || (route.channelIn && 'field' in route.channelIn) ? bodyIfJson(rawBody) : undefined;
  const tier = route.tierOf?.({ params, body });
  if (!tier) checkPermission(route, principal);
  else if (!principal.permissions.includes(tier.permission)) {
    throw new ForbiddenError(`This request needs the '${tier.permission}' permission.`, 'forbidden', tier.permission);
  }
  checkChannel(route, principal, params, body);
}

/**
 * A light channel outside the key's allowed channels is an access refusal like a missing
 * permission (the spec's rule 3): 403 without `required_permission`, since no permission lifts it.
 */
function checkChannel(route: RouteDef, principal: Principal, params: Record<string, string>, body: unknown): void {
  const where = route.channelIn;
  if (!where) return;
  const channel = 'param' in where ? params[where.param] : (body as Record<string, unknown> | null | undefined)?.[where.field];
  if (typeof channel !== 'string' || !(CHANNELS as readonly string[]).includes(channel)) return;
  if (!(principal.allowed_channels as readonly string[]).includes(channel)) {
    throw new ForbiddenError(`Your account may not command channel '${channel}'.`);
  }
}

/** The body parsed as JSON, or undefined when it is empty or not JSON (refused later, with its own answer). */
function bodyIfJson(rawBody: Buffer): unknown {
  if (rawBody.length === 0) return undefined;
  try {
    return JSON.parse(rawBody.toString('utf8'));
  } catch {
    return undefined;
  }
}
