/** Device topics and the JetStream subjects they are captured under. Pure. */

export {
  captureSubject,
  parseDeviceTopic,
  subjectToken,
  type DeviceTopic,
  type Direction,
  type Product,
  type TopicRoots,
} from '@fleet/device-protocol';
import type { DeviceTopic, TopicRoots } from '@fleet/device-protocol';

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

/** True for the presence topic `<root>/<id>/status`. */
export function isStatusTopic(topic: DeviceTopic): boolean {
  return topic.levels.length === 1 && topic.levels[0] === 'status';
}
