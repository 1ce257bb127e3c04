import type { Product } from './products';

/**
 * Who may do what at the MQTT broker, as the broker authentication hook answers it. Pure.
 *
 * A device connects with client id = username = its device id and its own password, and
 * publishes or subscribes only inside its own subtree `<root>/<device_id>/…` (`<root>` is its
 * product's topic root). The platform's own identity (mqtt-bridge, the registry's session
 * takeover) connects with any client id and may use every topic.
 */
export type TopicRoots = Record<Product, string>;
export type BrokerAction = 'publish' | 'subscribe';

/** Whether a device may publish to `topic`, or subscribe with the filter `topic`. */
export function deviceMayUse(topic: string, deviceId: string, product: Product, roots: TopicRoots): boolean {
  const own = `${roots[product]}/${deviceId}`;
  // Compared as text: a wildcard in the root or device levels (`light/+/cmd`, `#`, `$share/…`)
  // never equals them, so a filter that spans devices is refused.
  return topic === own || topic.startsWith(`${own}/`);
}

/**
 * The MQTT topic (or filter) of a RabbitMQ routing key: its MQTT plugin writes `/` as `.`, and
 * the wildcards `+` and `#` as `*` and `#`.
 */
export function topicOfRoutingKey(routingKey: string): string {
  return routingKey
    .split('.')
    .map((level) => (level === '*' ? '+' : level))
    .join('/');
}
