/**
 * Commands of Mosquitto's dynamic-security plugin (2.0) for device credentials and the
 * bridge's own role. Pure: builds command objects and reads responses.
 * Mosquitto 2.0.11 does not substitute %u/%c in ACLs, so every device gets its own role.
 */
import { deviceAcls as protocolDeviceAcls, type BrokerAcl } from '@fleet/device-protocol';
import type { Product, TopicRoots } from './topics';

export type DynsecAcl = BrokerAcl;
export { BRIDGE_ACLS, BRIDGE_ROLE, deviceRoleName } from '@fleet/device-protocol';

export type DynsecCommand = { command: string } & Record<string, unknown>;

export interface DynsecResponse {
  command: string;
  error?: string;
  data?: unknown;
  correlationData?: string;
}

/** A device may publish, receive, subscribe and unsubscribe only under <root>/<device_id>/# (the protocol's ACL). */
export function deviceAcls(roots: TopicRoots, product: Product, deviceId: string): DynsecAcl[] {
  return protocolDeviceAcls(roots[product], deviceId);
}

export const isAlreadyExists = (r: DynsecResponse): boolean => /already exists/i.test(r.error ?? '');
export const isNotFound = (r: DynsecResponse): boolean => /not found/i.test(r.error ?? '');

/** Same ACL set, ignoring order and priority. */
export function sameAcls(a: DynsecAcl[], b: DynsecAcl[]): boolean {
  const key = (x: DynsecAcl) => `${x.acltype}|${x.topic}|${x.allow}`;
  const left = a.map(key).sort();
  const right = b.map(key).sort();
  return left.length === right.length && left.every((k, i) => k === right[i]);
}

/** The ACLs in a getRole response's data ({role: {rolename, acls}}). */
export function aclsOf(data: unknown): DynsecAcl[] {
  const role = (data as { role?: { acls?: unknown } } | undefined)?.role;
  return Array.isArray(role?.acls) ? (role.acls as DynsecAcl[]) : [];
}

/** The role names in a getClient response's data ({client: {roles: [{rolename}]}}). */
export function rolesOf(data: unknown): string[] {
  const roles = (data as { client?: { roles?: unknown } } | undefined)?.client?.roles;
  return Array.isArray(roles) ? roles.map((r: { rolename?: unknown }) => String(r.rolename)) : [];
}
