/**
 * A device's org node as a partner may see it (spec, Configuration: GET /v1/org-tree shows the
 * granted subtrees as a forest, each granted root's parent_id nulled). The device is in the
 * partner's scope, so its node is in a granted subtree; its parent is outside the scope only
 * when the node is itself a granted root that no other grant covers.
 */
import type { Principal } from '@fleet/contracts';

export interface OrgNodeView {
  id: number;
  parent_id: number | null;
  name: string;
}

/** True when the parent is visible (or there is none) without knowing the node's path. */
export function parentVisibleWithoutPath(node: OrgNodeView, principal: Pick<Principal, 'permissions' | 'org_grants'>): boolean {
  return node.parent_id === null || principal.permissions.includes('access_all_devices') || !principal.org_grants.includes(node.id);
}

/**
 * The node with its parent nulled when the parent is outside the partner's scope. `path` is the
 * node's path from its root, root first, the node last: the parent is in scope when a grant is
 * the parent or one of its ancestors.
 */
export function orgNodeInScope(node: OrgNodeView, principal: Pick<Principal, 'permissions' | 'org_grants'>, path: readonly number[]): OrgNodeView {
  if (parentVisibleWithoutPath(node, principal)) return node;
  const ancestors = path.slice(0, -1);
  return ancestors.some((id) => principal.org_grants.includes(id)) ? node : { ...node, parent_id: null };
}
