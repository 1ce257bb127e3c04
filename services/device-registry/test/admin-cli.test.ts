/**
 * `npm run -s admin -- org ...` is carried out by services/device-registry/dist/admin/cli.js
 * (scripts/admin.js routes `org` there). It works without the fleet: it migrates the registry's
 * database itself. Runs the built CLI (the root `npm test` builds first).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { connect, JSONCodec } from 'nats';
import { dropDatabase } from '@fleet/db';
import { databaseUrl, testEnv, uniqueId, waitFor } from '@fleet/test-kit';

const cli = path.resolve(__dirname, '../dist/admin/cli.js');
const dbUrl = databaseUrl(uniqueId('registry_cli_'));

function admin(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [cli, ...args], {
    env: { ...process.env, DATABASE_URL: dbUrl, HEALTH_PORT: '' },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  if (!fs.existsSync(cli)) throw new Error(`build the service first: ${cli} is missing`);
});

afterAll(async () => {
  await dropDatabase(dbUrl);
});

describe('admin org commands', () => {
  it('creates root and child organizations, printing one JSON object; Staging / Inventory exists as a root', () => {
    const root = admin('org', 'create', '--name', 'Acme Corp');
    expect(root.status).toBe(0);
    const rootNode = JSON.parse(root.stdout) as { id: number; parent_id: number | null; name: string };
    expect(rootNode).toEqual({ id: expect.any(Number), parent_id: null, name: 'Acme Corp' });
    expect(root.stdout.trim().split('\n')).toHaveLength(1);

    const child = admin('org', 'create', '--name', 'Berlin', '--parent', String(rootNode.id));
    expect(child.status).toBe(0);
    expect(JSON.parse(child.stdout)).toEqual({ id: expect.any(Number), parent_id: rootNode.id, name: 'Berlin' });

    const list = admin('org', 'list');
    const nodes = (JSON.parse(list.stdout) as { nodes: { id: number; parent_id: number | null; name: string }[] }).nodes;
    expect(nodes[0]).toEqual({ id: 1, parent_id: null, name: 'Staging / Inventory' });
    expect(nodes.map((n) => n.name).slice(0, 3)).toEqual(['Staging / Inventory', 'Acme Corp', 'Berlin']);
  });

  it('announces a new node to running services (evt.registry.org.changed.v1)', async () => {
    const nc = await connect({ servers: testEnv.natsUrl });
    const seen: { org_node_id: number; change: string }[] = [];
    nc.subscribe('evt.registry.org.changed.v1', { callback: (_e, m) => seen.push(JSONCodec<{ org_node_id: number; change: string }>().decode(m.data)) });
    await nc.flush();
    try {
      const r = admin('org', 'create', '--name', 'Announced');
      expect(r.status).toBe(0);
      const { id } = JSON.parse(r.stdout) as { id: number };
      await waitFor(() => seen.some((e) => e.org_node_id === id && e.change === 'created'), { what: 'org.changed event' });
    } finally {
      await nc.close();
    }
  });

  it('is reachable through the root admin script', () => {
    const r = spawnSync(process.execPath, [path.resolve(__dirname, '../../../scripts/admin.js'), 'org', 'create', '--name', 'Via root'], {
      env: { ...process.env, DATABASE_URL: dbUrl },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ parent_id: null, name: 'Via root' });
  });

  it('fails with a message on stderr and a non-zero exit', () => {
    for (const args of [
      ['org', 'create'],
      ['org', 'create', '--name', 'X', '--parent', '999999'],
      ['org', 'create', '--name', 'X', '--parent', 'abc'],
      ['org', 'create', '--name', '   '],
      ['org', 'create', '--name', 'X', '--colour', 'red'],
      ['org', 'explode'],
    ]) {
      const r = admin(...args);
      expect(r.status).not.toBe(0);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^admin: .+/);
    }
  });
});
