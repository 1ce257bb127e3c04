import type { Principal } from '@fleet/contracts';
import { ConflictError, ForbiddenError } from '@fleet/service-kit';
import { STAGING_NODE_ID } from './products';

/** The two scope sources the spec allows, and no others. */
export type Scope = { all: true } | { all: false; grants: number[] };

export function scopeOf(principal: Pick<Principal, 'permissions' | 'org_grants'> | undefined): Scope {
  if (!principal) return { all: false, grants: [] };
  if (principal.permissions.includes('access_all_devices')) return { all: true };
  return { all: false, grants: [...new Set(principal.org_grants)] };
}

export interface OrgNodeRow {
  id: number;
  parentId: number | null;
  name: string;
}

/** Ids of every node in the subtrees rooted at `roots` (roots that do not exist contribute nothing). */
export function subtreeIds(nodes: readonly OrgNodeRow[], roots: readonly number[]): Set<number> {
  const children = new Map<number, number[]>();
  const exists = new Set<number>();
  for (const n of nodes) {
    exists.add(n.id);
    if (n.parentId !== null) children.set(n.parentId, [...(children.get(n.parentId) ?? []), n.id]);
  }
  const out = new Set<number>();
  const stack = roots.filter((r) => exists.has(r));
  while (stack.length > 0) {
    const id = stack.pop() as number;
    if (out.has(id)) continue;
    out.add(id);
    stack.push(...(children.get(id) ?? []));
  }
  return out;
}

/** Is the node inside the scope? (Devices at Staging are visible only with access-all or a Staging grant.) */
export function nodeInScope(nodes: readonly OrgNodeRow[], scope: Scope, nodeId: number): boolean {
  if (scope.all) return nodes.some((n) => n.id === nodeId);
  return subtreeIds(nodes, scope.grants).has(nodeId);
}

/** Each known node's path from its root to itself (unknown ids left out; a cycle stops the walk). */
export function orgPaths(nodes: readonly OrgNodeRow[], ids: readonly number[]): Array<{ org_node_id: number; path: number[] }> {
  const parentOf = new Map(nodes.map((n) => [n.id, n.parentId]));
  return ids
    .filter((id) => parentOf.has(id))
    .map((id) => {
      const path: number[] = [];
      for (let at: number | null | undefined = id; at !== null && at !== undefined && !path.includes(at); at = parentOf.get(at)) path.push(at);
      return { org_node_id: id, path: path.reverse() };
    });
}

/**
 * GET /v1/org-tree: the whole tree with access-all; otherwise the granted subtrees as a forest,
 * where a node whose parent is outside the scope shows parent_id null. Ordered by id.
 */
export function orgForest(nodes: readonly OrgNodeRow[], scope: Scope): { id: number; parent_id: number | null; name: string }[] {
  const visible = scope.all ? new Set(nodes.map((n) => n.id)) : subtreeIds(nodes, scope.grants);
  return nodes
    .filter((n) => visible.has(n.id))
    .sort((a, b) => a.id - b.id)
    .map((n) => ({ id: n.id, parent_id: n.parentId !== null && visible.has(n.parentId) ? n.parentId : null, name: n.name }));
}

/**
 * PUT .../org: where the device goes, or the refusal. `null` detaches to Staging / Inventory and
 * only access-all may do it (409 would_lose_access for an org-scoped caller); any other target must
 * lie in the caller's scope (403 node_out_of_scope, which also covers a node that does not exist).
 */
export function resolveMoveTarget(nodes: readonly OrgNodeRow[], scope: Scope, target: number | null): number {
  if (target === null) {
    if (!scope.all) throw new ConflictError('Detaching the device to Staging / Inventory would remove your own access to it.', 'would_lose_access');
    return STAGING_NODE_ID;
  }
  // A target inside the caller's scope keeps the device inside it, so only null can lose access.
  if (!nodeInScope(nodes, scope, target)) throw new ForbiddenError(`Organization node ${target} is outside your scope.`, 'node_out_of_scope');
  return target;
}
