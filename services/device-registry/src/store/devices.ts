import type { DeviceRecord } from '../domain/device-view';
import type { Product } from '../domain/products';
import type { Scope } from '../domain/scope';
import type { RegistryTx } from './prisma';

export interface StoredDevice extends DeviceRecord {
  credentialSource: string;
  settingsKeyCiphertext: string | null;
}

interface DeviceRow {
  device_id: string;
  product: string;
  name: string | null;
  org_node_id: number;
  automation_enabled: boolean;
  status: string;
  status_changed_at: Date | null;
  last_seen_at: Date | null;
  created_at: Date;
}

const fromRow = (r: DeviceRow): DeviceRecord => ({
  deviceId: r.device_id,
  product: r.product,
  name: r.name,
  orgNodeId: r.org_node_id,
  automationEnabled: r.automation_enabled,
  status: r.status,
  statusChangedAt: r.status_changed_at,
  lastSeenAt: r.last_seen_at,
  createdAt: r.created_at,
});

/**
 * The device when it lies in the scope, else null (nonexistent and out of scope are the same).
 * Walks up from the device's node: in scope when any ancestor (itself included) is a granted root.
 * No depth limit, as the listing has none: a device listed is a device readable however deep it sits.
 */
export async function findDeviceInScope(db: RegistryTx, deviceId: string, scope: Scope): Promise<DeviceRecord | null> {
  const grants = scope.all ? [] : scope.grants;
  const rows = await db.$queryRaw<DeviceRow[]>`
    SELECT d.device_id, d.product, d.name, d.org_node_id, d.automation_enabled, d.status, d.status_changed_at, d.last_seen_at, d.created_at
    FROM devices d
    WHERE d.device_id = ${deviceId}
      AND (${scope.all}::boolean OR EXISTS (
        WITH RECURSIVE up(id, parent_id) AS (
          SELECT n.id, n.parent_id FROM org_nodes n WHERE n.id = d.org_node_id
          UNION
          SELECT p.id, p.parent_id FROM org_nodes p JOIN up ON p.id = up.parent_id
        )
        SELECT 1 FROM up WHERE up.id = ANY(${grants}::int[])
      ))`;
  const row = rows[0];
  return row ? fromRow(row) : null;
}

/** Every device in the scope, optionally of one product, in device-id order. */
export async function listDevicesInScope(db: RegistryTx, scope: Scope, product: Product | null): Promise<DeviceRecord[]> {
  const grants = scope.all ? [] : scope.grants;
  const rows = await db.$queryRaw<DeviceRow[]>`
    WITH RECURSIVE granted(id) AS (
      SELECT n.id FROM org_nodes n WHERE n.id = ANY(${grants}::int[])
      UNION
      SELECT c.id FROM org_nodes c JOIN granted g ON c.parent_id = g.id
    )
    SELECT d.device_id, d.product, d.name, d.org_node_id, d.automation_enabled, d.status, d.status_changed_at, d.last_seen_at, d.created_at
    FROM devices d
    WHERE (${scope.all}::boolean OR d.org_node_id IN (SELECT id FROM granted))
      AND (${product}::text IS NULL OR d.product = ${product}::text)
    ORDER BY d.device_id`;
  return rows.map(fromRow);
}

export async function findDevice(db: RegistryTx, deviceId: string): Promise<StoredDevice | null> {
  const d = await db.device.findUnique({ where: { deviceId } });
  if (!d) return null;
  return {
    deviceId: d.deviceId,
    product: d.product,
    name: d.name,
    orgNodeId: d.orgNodeId,
    automationEnabled: d.automationEnabled,
    status: d.status,
    statusChangedAt: d.statusChangedAt,
    lastSeenAt: d.lastSeenAt,
    credentialSource: d.credentialSource,
    settingsKeyCiphertext: d.settingsKeyCiphertext,
    createdAt: d.createdAt,
  };
}

/** Serializes work on one device id until the transaction ends (provisioning races). */
export async function lockDeviceId(tx: RegistryTx, deviceId: string): Promise<void> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext(${`device:${deviceId}`}))`;
}

export interface NewDevice {
  deviceId: string;
  product: Product;
  name: string | null;
  orgNodeId: number;
  credentialSource: string;
  settingsKeyCiphertext: string | null;
  brokerPasswordHash: string | null;
}

export async function insertDevice(tx: RegistryTx, d: NewDevice): Promise<void> {
  await tx.device.create({ data: { ...d, status: 'disconnected' } });
}

/**
 * Provisioning's one statement: under the device id's lock (lockDeviceId's), the record and, if
 * the id was free, its event in the outbox. False when a record already holds the id (nothing
 * was written). One round trip instead of four: at thousands of provisionings a second, each
 * round trip is a measurable share of the registry's CPU. `guard`: statementBy's commit-deadline
 * CTE, when the statement commits on its own.
 */
export async function insertDeviceWithEvents(db: RegistryTx, d: NewDevice, events: Array<{ subject: string; payload: unknown }>, guard?: string): Promise<boolean> {
  const [row] = await db.$queryRawUnsafe<Array<{ inserted: number }>>(
    `WITH ${guard ? `${guard},` : ''}
    locked AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtext($1))),
    device AS (
      INSERT INTO devices (device_id, product, name, org_node_id, credential_source, settings_key_ciphertext, broker_password_hash, status)
      SELECT $2, $3, $4, $5, $6, $7, $8, 'disconnected' FROM locked
      ON CONFLICT (device_id) DO NOTHING
      RETURNING device_id),
    event AS (
      INSERT INTO outbox_events (subject, payload)
      SELECT e.s, e.p::jsonb FROM device, unnest($9::text[], $10::text[]) WITH ORDINALITY AS e(s, p, n) ORDER BY e.n
      RETURNING id)
    SELECT (SELECT count(*) FROM device)::int AS inserted`,
    `device:${d.deviceId}`,
    d.deviceId,
    d.product,
    d.name,
    d.orgNodeId,
    d.credentialSource,
    d.settingsKeyCiphertext,
    d.brokerPasswordHash,
    events.map((e) => e.subject),
    events.map((e) => JSON.stringify(e.payload)),
  );
  return row?.inserted === 1;
}

/** Deletes the device and what cascades with it (telemetry). Returns false when it was already gone. */
export async function deleteDevice(db: RegistryTx, deviceId: string): Promise<boolean> {
  const r = await db.device.deleteMany({ where: { deviceId } });
  return r.count > 0;
}

export async function renameDevice(db: RegistryTx, deviceId: string, name: string): Promise<boolean> {
  return (await db.device.updateMany({ where: { deviceId }, data: { name } })).count > 0;
}

export async function moveDevice(db: RegistryTx, deviceId: string, orgNodeId: number): Promise<boolean> {
  return (await db.device.updateMany({ where: { deviceId }, data: { orgNodeId } })).count > 0;
}

export async function setAutomation(db: RegistryTx, deviceId: string, enabled: boolean): Promise<boolean> {
  return (await db.device.updateMany({ where: { deviceId }, data: { automationEnabled: enabled } })).count > 0;
}

/** A device as another service needs it: its org node written out, automation only on a light. */
export interface DescribedDevice {
  device_id: string;
  product: Product | null;
  name: string | null;
  org_node: { id: number; parent_id: number | null; name: string } | null;
  automation_enabled: boolean;
}

/** The known devices among `deviceIds`, in device-id order. */
export async function describeDevices(db: RegistryTx, deviceIds: string[]): Promise<DescribedDevice[]> {
  const rows = await db.device.findMany({ where: { deviceId: { in: deviceIds } }, include: { orgNode: true }, orderBy: { deviceId: 'asc' } });
  return rows.map((d) => ({
    device_id: d.deviceId,
    product: d.product === 'light' || d.product === 'meter' ? d.product : null,
    name: d.name,
    org_node: d.orgNode ? { id: d.orgNode.id, parent_id: d.orgNode.parentId, name: d.orgNode.name } : null,
    automation_enabled: d.product === 'light' && d.automationEnabled,
  }));
}
