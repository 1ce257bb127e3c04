/**
 * The broker ACL of device protocol v1: a device may publish, receive, subscribe and
 * unsubscribe only under `<root>/<device_id>/#`; the platform's bridge role may do anything,
 * shared subscriptions included. Written as Mosquitto dynamic-security ACL entries, used by
 * mqtt-bridge when it provisions devices and by the launcher when it writes a fresh broker.
 */
import { deviceBase } from './topics';

export interface BrokerAcl {
  acltype: 'publishClientSend' | 'publishClientReceive' | 'subscribePattern' | 'subscribeLiteral' | 'unsubscribePattern' | 'unsubscribeLiteral';
  topic: string;
  allow: boolean;
  priority?: number;
}

/** The bridge's role name on the broker. */
export const BRIDGE_ROLE = 'fleet-bridge';

/** What the bridge needs beyond the dynsec API: publish to devices, shared subscriptions (literal `$share/...` ACL). */
export const BRIDGE_ACLS: readonly BrokerAcl[] = [
  { acltype: 'publishClientSend', topic: '#', allow: true },
  { acltype: 'publishClientReceive', topic: '#', allow: true },
  { acltype: 'subscribePattern', topic: '#', allow: true },
  { acltype: 'unsubscribePattern', topic: '#', allow: true },
  { acltype: 'subscribePattern', topic: '$share/#', allow: true },
  { acltype: 'unsubscribePattern', topic: '$share/#', allow: true },
];

/** A device's own role: `device-<device_id>` (Mosquitto 2.0 does not substitute %u/%c in ACLs). */
export const deviceRoleName = (deviceId: string): string => `device-${deviceId}`;

/** A device may publish, receive, subscribe and unsubscribe only under <root>/<device_id>/#. */
export function deviceAcls(root: string, deviceId: string): BrokerAcl[] {
  const topic = `${deviceBase(root, deviceId)}/#`;
  return (['publishClientSend', 'publishClientReceive', 'subscribePattern', 'unsubscribePattern'] as const).map((acltype) => ({ acltype, topic, allow: true }));
}
