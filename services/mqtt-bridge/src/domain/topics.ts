/** Device topics and the JetStream subjects they are captured under. Pure. */

export type Product = 'light' | 'meter';
export type Direction = 'in' | 'out';

export interface TopicRoots {
  light: string;
  meter: string;
}

export interface DeviceTopic {
  product: Product;
  deviceId: string;
  /** The topic levels after <root>/<device_id>/ (at least one). */
  levels: string[];
}

const DEVICE_ID = /^[0-9A-F]{12}$/;

/**
 * Splits `<root>/<device id>/<rest...>` for a known root; undefined for anything else
 * (other roots, ids that are not 12 uppercase hex characters, nothing after the id).
 */
export function parseDeviceTopic(topic: string, roots: TopicRoots): DeviceTopic | undefined {
  for (const product of ['light', 'meter'] as const) {
    const root = roots[product];
    if (!topic.startsWith(`${root}/`)) continue;
    const [deviceId, ...levels] = topic.slice(root.length + 1).split('/');
    if (deviceId === undefined || !DEVICE_ID.test(deviceId) || levels.length === 0) return undefined;
    return { product, deviceId, levels };
  }
  return undefined;
}

/**
 * A topic level as a NATS subject token: '.', '*', '>', whitespace (and other control
 * characters) become '_'; an empty level is '_'.
 */
export function subjectToken(level: string): string {
  // eslint-disable-next-line no-control-regex
  const token = level.replace(/[.*>\s\x00-\x1f\x7f]/g, '_');
  return token === '' ? '_' : token;
}

/** `<prefix>dev.<in|out>.<product>.<device_id>.<levels as tokens>`. */
export function captureSubject(prefix: string, direction: Direction, topic: DeviceTopic): string {
  return `${prefix}dev.${direction}.${topic.product}.${topic.deviceId}.${topic.levels.map(subjectToken).join('.')}`;
}

/** The shared subscriptions every replica holds: one per topic root. */
export function sharedSubscriptions(group: string, roots: TopicRoots): string[] {
  return [`$share/${group}/${roots.light}/+/#`, `$share/${group}/${roots.meter}/+/#`];
}

/**
 * The backstop session's subscriptions: every device topic as a plain (not shared)
 * subscription, which Mosquitto keeps across its own restarts (it drops shared ones), plus the
 * marker topics that tell the backstop the share group is subscribed again.
 */
export function backstopSubscriptions(group: string, roots: TopicRoots): string[] {
  return [`${roots.light}/+/#`, `${roots.meter}/+/#`, `${backstopMarkerRoot(group)}/+`];
}

/** Where backstop markers are published; outside every device subtree, so no device can publish there. */
export function backstopMarkerRoot(group: string): string {
  return `fleet-backstop/${group}`;
}

/** The device's own subtree, the only place its role allows. */
export function deviceSubtree(roots: TopicRoots, product: Product, deviceId: string): string {
  return `${roots[product]}/${deviceId}/#`;
}

/** True for the presence topic `<root>/<id>/status`. */
export function isStatusTopic(topic: DeviceTopic): boolean {
  return topic.levels.length === 1 && topic.levels[0] === 'status';
}
