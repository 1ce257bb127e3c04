/**
 * Who may receive an event: a partner receives an event only when its permissions would let it
 * read what the event reports (proto-schemas/events/partner-event-types.json) and the device was
 * in its scope where the event happened (any node of `places`: a move counts where the device
 * left and where it arrived).
 */
import { isPartnerEventType, permissionToReceive, type Permission } from '@fleet/contracts';

export interface PartnerAccess {
  partnerId: string;
  permissions: ReadonlySet<Permission>;
  /** Roots of the partner's granted subtrees. */
  orgGrants: readonly number[];
}

/**
 * `places`: the root-to-node path of each org node the device sat in when the event happened;
 * undefined for an event of no device (only `webhook.test` today, which is never fanned out).
 */
export function mayReceive(access: PartnerAccess, type: string, places: ReadonlyArray<readonly number[]> | undefined): boolean {
  if (!isPartnerEventType(type)) return false;
  const permission = permissionToReceive(type);
  if (permission && !access.permissions.has(permission)) return false;
  if (places === undefined) return true;
  if (access.permissions.has('access_all_devices')) return places.length > 0;
  return places.some((path) => path.some((node) => access.orgGrants.includes(node)));
}

/**
 * An event as one partner receives it. A move names a node only where the partner can see it:
 * the node the device left or reached outside the partner's scope is null ("from / to outside
 * your scope"), as `GET /v1/org-tree` and a device's configuration show no node beyond its
 * grants. `places` as for mayReceive (a move's two nodes, each as its root-to-node path).
 */
export function eventFor<E extends { type: string; data: unknown }>(access: PartnerAccess, event: E, places: ReadonlyArray<readonly number[]> | undefined): E {
  if (event.type !== 'device.moved' || access.permissions.has('access_all_devices')) return event;
  const data = event.data as Record<string, unknown>;
  const seen = (node: unknown): unknown =>
    (places ?? []).some((path) => path[path.length - 1] === node && path.some((n) => access.orgGrants.includes(n))) ? node : null;
  const from = seen(data.from_org_node_id);
  const to = seen(data.to_org_node_id);
  if (from === data.from_org_node_id && to === data.to_org_node_id) return event;
  return { ...event, data: { ...data, from_org_node_id: from, to_org_node_id: to } };
}

/** The types a stream or an endpoint asked for that the partner may receive at all (permission only). */
export function receivableTypes(access: Pick<PartnerAccess, 'permissions'>, types: readonly string[]): string[] {
  return types.filter((type) => {
    if (!isPartnerEventType(type)) return false;
    const permission = permissionToReceive(type);
    return !permission || access.permissions.has(permission);
  });
}
