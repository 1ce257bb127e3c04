import { dropDatabase, ensureDatabase, migrate } from '@fleet/db';
import { databaseUrl, uniqueId } from '@fleet/test-kit';
import { AdminError, runAdminCommand } from '../src/admin/commands';
import { MIGRATIONS_DIR } from '../src/migrations';
import { openGatewayDb, type GatewayDb } from '../src/store/prisma';

// The partner staff commands against a migrated database of this file's own.
const dbUrl = databaseUrl(`fleet_test_${uniqueId('adm')}`);
let db: GatewayDb;

beforeAll(async () => {
  await ensureDatabase(dbUrl);
  await migrate(dbUrl, MIGRATIONS_DIR);
  db = openGatewayDb(dbUrl);
});

afterAll(async () => {
  await db?.$disconnect();
  await dropDatabase(dbUrl);
});

const admin = (...argv: string[]) => runAdminCommand(db, argv);
const created = async (...flags: string[]) => {
  const { id } = await admin('partner', 'create', '--name', `P ${uniqueId()}`, ...flags);
  return admin('partner', 'update', '--id', String(id), '--name', `P ${uniqueId()}`);
};

describe('partner permissions and scope', () => {
  it('--permissions all leaves out access_all_devices and the internal raw MQTT permissions', async () => {
    const p = await created('--permissions', 'all', '--grant', '7');
    expect(p.permissions).toHaveLength(21);
    expect(p.permissions).toEqual(expect.arrayContaining(['events_read', 'webhook_manage']));
    expect(p.permissions).not.toContain('access_all_devices');
    expect(p.permissions).not.toContain('raw_mqtt_devices');
    expect(p.permissions).not.toContain('raw_mqtt_global');
    expect(p.org_grants).toEqual([7]);
  });

  it('grants the left-out permissions only when named', async () => {
    const p = await created('--permissions', 'all,raw_mqtt_devices', '--access-all-devices');
    expect(p.permissions).toHaveLength(23);
    expect(p.permissions).toContain('access_all_devices');
    expect(p.permissions).toContain('raw_mqtt_devices');
    expect(p.permissions).not.toContain('raw_mqtt_global');
  });

  it('refuses --grant beside access_all_devices, on create and on an update that would mix them', async () => {
    for (const flags of [
      ['--permissions', 'all', '--access-all-devices', '--grant', '3'],
      ['--permissions', 'state_read,access_all_devices', '--grant', '3'],
    ]) {
      await expect(admin('partner', 'create', '--name', 'Both', ...flags)).rejects.toThrow(AdminError);
      await expect(admin('partner', 'create', '--name', 'Both', ...flags)).rejects.toThrow(/exclude each other/);
    }
    const scoped = await created('--permissions', 'state_read', '--grant', '3');
    await expect(admin('partner', 'update', '--id', String(scoped.id), '--access-all-devices')).rejects.toThrow(AdminError);
    const everywhere = await created('--permissions', 'state_read', '--access-all-devices');
    await expect(admin('partner', 'update', '--id', String(everywhere.id), '--grant', '4')).rejects.toThrow(AdminError);
    // Replacing both at once is fine.
    const moved = await admin('partner', 'update', '--id', String(everywhere.id), '--permissions', 'state_read', '--grant', '4');
    expect(moved).toMatchObject({ permissions: ['state_read'], org_grants: [4] });
  });

  it('describes the commands and the rules of all and scope in partner help', async () => {
    const { usage } = await admin('partner', 'help');
    const text = (usage as string[]).join('\n');
    expect(text).toMatch(/--permissions all: every permission except access_all_devices, raw_mqtt_devices, raw_mqtt_global/);
    expect(text).toMatch(/never both \(exit 2\)/);
  });
});
