/**
 * Raw MQTT topics and topic filters (MQTT 3.1.1, 4.7), and where the bridge's captures of the
 * matching messages sit in DEVICE_IN (`dev.<in|out>.<product>.<device_id>.<levels as tokens>`,
 * packages/device-protocol). Pure.
 */
import { isDeviceId, mqttStringProblem, PRODUCTS, subjectToken, type Product, type TopicRoots } from '@fleet/device-protocol';
import { ValidationError } from '@fleet/service-kit';

/** Wildcards of topic filters: `+` one level, `#` every level below (and the level itself). */
const SINGLE = '+';
const MULTI = '#';

/**
 * A topic a raw publish may name: no wildcards, only what the broker accepts in an MQTT
 * string (no control characters, non-characters or unpaired surrogates, at most 65,535
 * bytes; the broker would drop the platform's connection otherwise), not empty, and not
 * `$`-prefixed (`$SYS/...` and the like belong to the broker). Empty levels (`a//b`, `/a`)
 * are legal MQTT and are kept.
 */
export function checkTopicName(topic: string): void {
  if (topic.length === 0) throw new ValidationError("'topic' must not be empty");
  if (topic.includes(SINGLE) || topic.includes(MULTI)) throw new ValidationError("'topic' may not contain the wildcards + or #");
  checkMqttString(topic);
  if (topic.startsWith('$')) throw new ValidationError("'topic' may not start with $ (reserved for the broker)");
}

function checkMqttString(topic: string): void {
  const problem = mqttStringProblem(topic);
  if (problem) throw new ValidationError(`'topic' may not contain ${problem}`);
}

/**
 * The levels of a topic filter: `+` must be a whole level, `#` a whole level and the last.
 * A `$`-prefixed filter is valid MQTT; it just matches nothing captured.
 */
export function parseTopicFilter(filter: string): string[] {
  if (filter.length === 0) throw new ValidationError("'topic' must not be empty");
  checkMqttString(filter);
  const levels = filter.split('/');
  levels.forEach((level, i) => {
    if (level.includes(MULTI) && (level !== MULTI || i !== levels.length - 1)) throw new ValidationError("'topic': # must be a whole level and the last one");
    if (level.includes(SINGLE) && level !== SINGLE) throw new ValidationError("'topic': + must be a whole level");
  });
  return levels;
}

/**
 * Whether a topic matches a filter (as parsed by parseTopicFilter): `+` matches exactly one
 * level, `#` any number of levels including none (`a/#` matches `a`), and a filter starting
 * with a wildcard never matches a `$`-prefixed topic.
 */
export function topicMatches(filter: readonly string[], topic: string): boolean {
  if (topic.startsWith('$') && (filter[0] === SINGLE || filter[0] === MULTI)) return false;
  const levels = topic.split('/');
  for (let i = 0; i < filter.length; i += 1) {
    const f = filter[i];
    if (f === MULTI) return true;
    if (i >= levels.length) return false;
    if (f !== SINGLE && f !== levels[i]) return false;
  }
  return levels.length === filter.length;
}

/**
 * Where a filter's leading levels stand for a product's root, which may be several levels
 * (`light`, `acme/eu/light`): the levels after the root, or `all` when a `#` inside the root
 * reaches every topic of the product; `wild` when a wildcard stood in for part of the root.
 */
interface RootMatch {
  product: Product;
  rest: readonly string[] | 'all';
  wild: boolean;
}

function rootMatches(filter: readonly string[], roots: TopicRoots): RootMatch[] {
  return PRODUCTS.flatMap((product): RootMatch[] => {
    const root = roots[product].split('/');
    let wild = false;
    for (let i = 0; i < root.length; i += 1) {
      const level = filter[i];
      if (level === undefined) return [];
      if (level === MULTI) return [{ product, rest: 'all', wild: true }];
      if (level === SINGLE) wild = true;
      else if (level !== root[i]) return [];
    }
    return [{ product, rest: filter.slice(root.length), wild }];
  });
}

/**
 * The DEVICE_IN subject filters (without the service's subject prefix) that cover every
 * captured message whose topic matches the filter: per product the filter can reach,
 * `dev.in.<rest>` and `dev.out.<rest>` (a consumer on nats-server 2.9 takes one filter, inside
 * one stream subject); products whose filters differ only in the product token share one (`*`).
 * Empty when no captured topic can match (another root, an id that is no device id, nothing
 * below the id).
 *
 * They may cover more than the filter, so rows are still matched against their `Mqtt-Topic`:
 * levels become subject tokens lossily (`a.b` and `a_b` are both `a_b`), and a filter ending in
 * `<level>/#` also matches the topic ending in `<level>`, so the subject filter covering both
 * stops one level higher (`light/ID/sys/#` reads `dev.in.light.ID.>`).
 */
export function captureSubjects(filter: readonly string[], roots: TopicRoots): string[] {
  const byTail = new Map<string, string[]>();
  for (const match of rootMatches(filter, roots)) {
    const tail = captureTail(match);
    if (tail !== undefined) byTail.set(tail, [...(byTail.get(tail) ?? []), match.product]);
  }
  const rests = [...byTail].map(([tail, products]) => {
    const product = products.length === 1 ? (products[0] as string) : '*';
    return tail === '>' && product === '*' ? '>' : `${product}.${tail}`;
  });
  return [...rests.map((rest) => `dev.in.${rest}`), ...rests.map((rest) => `dev.out.${rest}`)];
}

/** The subject filter after `dev.<direction>.<product>.`, for one product's reading of the filter. */
function captureTail({ rest }: RootMatch): string | undefined {
  if (rest === 'all') return '>';
  const [id, ...levels] = rest;
  if (id === undefined) return undefined;
  if (id === MULTI) return '>';
  if (id !== SINGLE && !isDeviceId(id)) return undefined;
  const base = id === SINGLE ? '*' : id;
  // A device's own topics always have a level below <root>/<id>.
  if (levels.length === 0) return undefined;
  if (levels[levels.length - 1] === MULTI) {
    // `<levels>/#` also matches `<levels>` itself: cover both with the parent's `>`.
    return [base, ...levels.slice(0, -2).map(token), '>'].join('.');
  }
  return [base, ...levels.map(token)].join('.');
}

const token = (level: string): string => (level === SINGLE ? '*' : subjectToken(level));

/** Which part of the device topics a filter reaches, for raw_mqtt_devices. */
export type FilterReach =
  /** Only topics under one device's `<root>/<device_id>/`. */
  | { kind: 'device'; product: Product; deviceId: string }
  /** Several devices' topics (a wildcard in the root or id level). */
  | { kind: 'spanning' }
  /** No device's topics (another root, an id that is no device id, nothing below the id). */
  | { kind: 'outside' };

export function filterReach(filter: readonly string[], roots: TopicRoots): FilterReach {
  if (filter[0] === SINGLE || filter[0] === MULTI) return { kind: 'spanning' };
  // Each product's reading of the filter (a root may be a prefix of another's); those that reach no device drop out.
  const reaches = rootMatches(filter, roots)
    .map(reachUnder)
    .filter((reach) => reach.kind !== 'outside');
  const [reach] = reaches;
  if (!reach) return { kind: 'outside' };
  return reaches.length === 1 ? reach : { kind: 'spanning' };
}

function reachUnder(match: RootMatch): FilterReach {
  // A wildcard standing in for part of a root reaches other roots' topics too.
  if (match.wild || match.rest === 'all') return { kind: 'spanning' };
  const [id, ...below] = match.rest;
  if (id === SINGLE || id === MULTI) return { kind: 'spanning' };
  if (id === undefined || !isDeviceId(id) || below.length === 0) return { kind: 'outside' };
  return { kind: 'device', product: match.product, deviceId: id };
}

/**
 * The QoS of a raw publish that names none: 2 on topics ending in `sys/<level>` (the system
 * interface, `sys/exe` among them), else 1.
 */
export const defaultRawQos = (topic: string): 1 | 2 => (/(^|\/)sys\/[^/]+$/.test(topic) ? 2 : 1);
