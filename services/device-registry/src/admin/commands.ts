import { NAME_MAX, nameLength } from '../domain/products';
import { createOrgNode, findOrgNode, allOrgNodes } from '../store/orgs';
import { recordEvent } from '../store/outbox';
import type { RegistryDb } from '../store/prisma';

/** A staff command failed in a way worth telling the operator (exit non-zero, message on stderr). */
export class AdminError extends Error {}

function parseOptions(argv: string[], allowed: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (!arg.startsWith('--')) throw new AdminError(`unexpected argument '${arg}'`);
    const [name, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    if (!allowed.includes(name)) throw new AdminError(`unknown option '--${name}'`);
    const value = inline ?? argv[++i];
    if (value === undefined) throw new AdminError(`option '--${name}' needs a value`);
    if (out.has(name)) throw new AdminError(`option '--${name}' given more than once`);
    out.set(name, value);
  }
  return out;
}

/**
 * `org create --name <name> [--parent <id>]` → {id, parent_id, name}, the node committed with
 * its `evt.registry.org.changed.v1` event (published by a running registry's outbox relay, or
 * by the next one to start);
 * `org list` → {nodes: [{id, parent_id, name}]}.
 */
export async function runAdminCommand(db: RegistryDb, argv: string[]): Promise<Record<string, unknown>> {
  const [entity, verb, ...rest] = argv;
  if (entity !== 'org') throw new AdminError(`unknown command '${entity ?? ''}'; use: org create, org list`);
  if (verb === 'create') {
    const opts = parseOptions(rest, ['name', 'parent']);
    const name = opts.get('name');
    if (name === undefined) throw new AdminError("missing required option '--name'");
    if (name.trim().length === 0 || nameLength(name) > NAME_MAX) throw new AdminError(`'--name' must be 1 to ${NAME_MAX} characters`);
    let parentId: number | null = null;
    const parent = opts.get('parent');
    if (parent !== undefined) {
      if (!/^[1-9][0-9]{0,9}$/.test(parent) || Number(parent) > 2_147_483_647) throw new AdminError("'--parent' must be an organization id");
      parentId = Number(parent);
      if (!(await findOrgNode(db, parentId))) throw new AdminError(`no organization with id ${parentId}`);
    }
    const node = await db.$transaction(async (tx) => {
      const created = await createOrgNode(tx, name, parentId);
      await recordEvent(tx, 'evt.registry.org.changed.v1', { org_node_id: created.id, change: 'created', at: new Date().toISOString() });
      return created;
    });
    return { id: node.id, parent_id: node.parentId, name: node.name };
  }
  if (verb === 'list') {
    parseOptions(rest, []);
    return { nodes: (await allOrgNodes(db)).map((n) => ({ id: n.id, parent_id: n.parentId, name: n.name })) };
  }
  throw new AdminError(`unknown command 'org ${verb ?? ''}'; use: org create, org list`);
}
