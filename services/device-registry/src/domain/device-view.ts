import { CHANNELS, type Principal } from '@fleet/contracts';

export interface DeviceRecord {
  deviceId: string;
  product: string;
  name: string | null;
  orgNodeId: number;
  automationEnabled: boolean;
  status: string;
  statusChangedAt: Date | null;
  lastSeenAt: Date | null;
  /** When the record was created (connectivity reported before it is of an earlier device with the id). */
  createdAt: Date;
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/**
 * The Device resource as the spec's table shows it to this partner: channels (the partner's
 * allowed channels) and automation_enabled on lights only; connectivity fields only with health_read.
 */
export function deviceView(device: DeviceRecord, principal: Pick<Principal, 'permissions' | 'allowed_channels'> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {
    device_id: device.deviceId,
    name: device.name,
    product: device.product === 'light' || device.product === 'meter' ? device.product : null,
  };
  if (device.product === 'light') {
    const allowed = new Set(principal?.allowed_channels ?? []);
    out.channels = CHANNELS.filter((c) => allowed.has(c));
    out.automation_enabled = device.automationEnabled;
  }
  if (principal?.permissions.includes('health_read')) Object.assign(out, connectivityOf(device));
  return out;
}

/** The connectivity fields of the spec's state table. */
export function connectivityOf(device: Pick<DeviceRecord, 'status' | 'statusChangedAt' | 'lastSeenAt'>): {
  status: 'connected' | 'disconnected';
  status_changed_at: string | null;
  last_seen_at: string | null;
} {
  return {
    status: device.status === 'connected' ? 'connected' : 'disconnected',
    status_changed_at: iso(device.statusChangedAt),
    last_seen_at: iso(device.lastSeenAt),
  };
}

/** The summary that travels in request envelopes (common/device-summary). */
export function deviceSummary(device: Pick<DeviceRecord, 'deviceId' | 'product' | 'orgNodeId' | 'name'>): {
  device_id: string;
  product: 'light' | 'meter' | null;
  org_node_id: number;
  name: string | null;
} {
  return {
    device_id: device.deviceId,
    product: device.product === 'light' || device.product === 'meter' ? device.product : null,
    org_node_id: device.orgNodeId,
    name: device.name,
  };
}

export const HEALTH_HOURS_DEFAULT = 24;
export const HEALTH_HOURS_MAX = 720;
export const HEALTH_LIMIT_DEFAULT = 100;
export const HEALTH_LIMIT_MAX = 500;
