import type { OrgNodeRow } from '../domain/scope';
import type { RegistryTx } from './prisma';

/** The whole organization tree (small: hundreds of nodes), ordered by id. */
export async function allOrgNodes(db: RegistryTx): Promise<OrgNodeRow[]> {
  const rows = await db.orgNode.findMany({ orderBy: { id: 'asc' } });
  return rows.map((r) => ({ id: r.id, parentId: r.parentId, name: r.name }));
}

export async function findOrgNode(db: RegistryTx, id: number): Promise<OrgNodeRow | null> {
  const r = await db.orgNode.findUnique({ where: { id } });
  return r ? { id: r.id, parentId: r.parentId, name: r.name } : null;
}

/** Nodes carrying exactly this name (placement picks among them by scope). */
export async function orgNodesNamed(db: RegistryTx, name: string): Promise<OrgNodeRow[]> {
  const rows = await db.orgNode.findMany({ where: { name }, orderBy: { id: 'asc' } });
  return rows.map((r) => ({ id: r.id, parentId: r.parentId, name: r.name }));
}

export async function createOrgNode(db: RegistryTx, name: string, parentId: number | null): Promise<OrgNodeRow> {
  const r = await db.orgNode.create({ data: { name, parentId } });
  return { id: r.id, parentId: r.parentId, name: r.name };
}
