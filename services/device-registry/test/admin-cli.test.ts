/**
 * `npm run -s admin -- org ...` is carried out by services/device-registry/dist/admin/cli.js
 * (scripts/admin.js routes `org` there). It works without the fleet: it migrates the registry's
 * database itself, and leaves its events in the registry's outbox for the registry's relay.
 * Runs the built CLI (the root `npm test` builds first).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { connect } from 'nats';
import { dropDatabase } from '@fleet/db';
import { databaseUrl, uniqueId, waitFor } from '@fleet/test-kit';
import { OutboxRelay, REGISTRY_EVENTS_STREAM } from '../src/handlers/outbox-relay';
import { openRegistryDb } from '../src/store/prisma';
import { logger, startPrivateNats } from './support';

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

  it('commits a new node with its evt.registry.org.changed.v1 event, which the registry relays when it next runs', async () => {
    const r = admin('org', 'create', '--name', 'Announced');
    expect(r.status).toBe(0);
    const { id } = JSON.parse(r.stdout) as { id: number };
    const db = openRegistryDb(dbUrl, 2);
    const nats = await startPrivateNats();
    const nc = await connect({ servers: nats.url });
    const relay = new OutboxRelay(db, nc, logger);
    try {
      const waiting = await db.outboxEvent.findMany({ where: { subject: 'evt.registry.org.changed.v1' }, orderBy: { id: 'asc' } });
      expect(waiting.at(-1)?.payload).toEqual({ org_node_id: id, change: 'created', at: expect.any(String) });

      relay.start();
      await waitFor(async () => (await db.outboxEvent.count()) === 0, { what: 'the outbox to empty' });
      const jsm = await nc.jetstreamManager();
      expect((await jsm.streams.info(REGISTRY_EVENTS_STREAM)).state.messages).toBe(waiting.length);
      expect((await jsm.streams.getMessage(REGISTRY_EVENTS_STREAM, { last_by_subj: 'evt.registry.org.changed.v1' })).json()).toEqual(waiting.at(-1)?.payload);
    } finally {
      await relay.stop();
      await nc.close();
      await nats.stop();
      await db.$disconnect();
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

  it('through the root admin script, follows FLEET_DATABASE_PREFIX to the database of a fleet started with it', async () => {
    const prefix = `${uniqueId('adm').toLowerCase().replace(/[^a-z0-9_]/g, '_')}_`;
    const prefixed = databaseUrl(`${prefix}device_registry`);
    const env = { ...process.env, FLEET_DATABASE_PREFIX: prefix } as NodeJS.ProcessEnv;
    delete env.DATABASE_URL;
    try {
      const r = spawnSync(process.execPath, [path.resolve(__dirname, '../../../scripts/admin.js'), 'org', 'create', '--name', 'Prefixed'], { env, encoding: 'utf8', timeout: 20_000 });
      expect(r.status).toBe(0);
      const { id } = JSON.parse(r.stdout) as { id: number };
      const db = openRegistryDb(prefixed, 1);
      try {
        expect((await db.orgNode.findUnique({ where: { id } }))?.name).toBe('Prefixed');
      } finally {
        await db.$disconnect();
      }
      const refused = spawnSync(process.execPath, [path.resolve(__dirname, '../../../scripts/admin.js'), 'org', 'list'], { env: { ...env, FLEET_DATABASE_PREFIX: 'Not-A-Prefix' }, encoding: 'utf8', timeout: 20_000 });
      expect(refused.status).toBe(2);
      expect(refused.stderr).toMatch(/FLEET_DATABASE_PREFIX/);
    } finally {
      await dropDatabase(prefixed);
    }
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
