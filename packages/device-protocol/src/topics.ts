/**
 * Topics of device protocol v1 and the JetStream subjects the bridge captures them under
 * (docs/protocol.md): `<root>/<device_id>/<levels...>`, one configurable root per product;
 * DEVICE_IN subjects `dev.<in|out>.<product>.<device_id>.<levels as tokens>`.
 */
import { isDeviceId, PRODUCTS, type Product } from './ids';

export type Direction = 'in' | 'out';

/** The topic root of each product (defaults `light` and `meter`). */
export interface TopicRoots {
  light: string;
  meter: string;
}

export const DEFAULT_TOPIC_ROOTS: TopicRoots = { light: 'light', meter: 'meter' };

/**
 * What a configured topic root may be, the same in every service: one level or several (`light`,
 * `acme/eu/light`), none of them empty, without wildcards or spaces.
 */
export const TOPIC_ROOT_PATTERN = /^[^#+/\s]+(\/[^#+/\s]+)*$/;
export const TOPIC_ROOT_RULE = 'a topic root like "light" or "acme/light" (no wildcards, spaces or empty levels)';

/** `<root>/<device_id>`: the device's own subtree, `<r>` in the protocol. */
export const deviceBase = (root: string, deviceId: string): string => `${root}/${deviceId}`;

/** Where system command lines go (QoS 2). */
export const sysExeTopic = (root: string, deviceId: string): string => `${deviceBase(root, deviceId)}/sys/exe`;

/** Where a light channel's wire payloads go (QoS 1). */
export const commandTopic = (root: string, deviceId: string, channel: string): string => `${deviceBase(root, deviceId)}/cmd/${channel}`;

export interface DeviceTopic {
  product: Product;
  deviceId: string;
  /** The topic levels after <root>/<device_id>/ (at least one). */
  levels: string[];
}

/**
 * Splits `<root>/<device id>/<rest...>` for a known root; undefined for anything else
 * (other roots, ids that are not 12 uppercase hex characters, nothing after the id).
 */
export function parseDeviceTopic(topic: string, roots: TopicRoots): DeviceTopic | undefined {
  for (const product of PRODUCTS) {
    const root = roots[product];
    if (!topic.startsWith(`${root}/`)) continue;
    const [deviceId, ...levels] = topic.slice(root.length + 1).split('/');
    // Not this product's device; another root may still hold it (one root the prefix of another).
    if (!isDeviceId(deviceId) || levels.length === 0) continue;
    return { product, deviceId, levels };
  }
  return undefined;
}

/**
 * The levels after `<root>/<device_id>/` of a device's topic whatever the root's depth (`light`
 * or `acme/light`): a consumer knows the device from the capture subject, not the root. Undefined
 * when the id is not a level after the first or nothing follows it.
 */
export function levelsAfterDevice(topic: string, deviceId: string): string[] | undefined {
  const levels = topic.split('/');
  const at = levels.indexOf(deviceId, 1);
  if (at < 1 || at === levels.length - 1) return undefined;
  return levels.slice(at + 1);
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

export interface CapturedSubject {
  direction: Direction;
  product: Product;
  deviceId: string;
  /** The topic levels as subject tokens. */
  tokens: string[];
}

/** Reads a DEVICE_IN subject (after an optional prefix); undefined when it is not one. */
export function parseCaptureSubject(subject: string, prefix = ''): CapturedSubject | undefined {
  if (!subject.startsWith(prefix)) return undefined;
  const [dev, direction, product, deviceId, ...tokens] = subject.slice(prefix.length).split('.');
  if (dev !== 'dev' || (direction !== 'in' && direction !== 'out') || !PRODUCTS.includes(product as Product) || !isDeviceId(deviceId) || tokens.length === 0) return undefined;
  return { direction, product: product as Product, deviceId, tokens };
}
