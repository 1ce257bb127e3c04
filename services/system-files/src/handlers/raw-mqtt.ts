/**
 * Raw MQTT (internal keys): publish a message as written, and read back captured traffic.
 *
 * Scope: raw_mqtt_global reaches any topic; raw_mqtt_devices only topics under
 * `<root>/<device id>/` of a device in the partner's scope (and of that device's product), and
 * a read filter must sit under one such device (a filter spanning devices is 400). Anything
 * else is 403 with raw_mqtt_global as the permission that would allow it.
 *
 * History: what DEVICE_IN keeps (its retention window); topics outside the device roots are
 * never captured, so they read back empty.
 */
import type { Principal } from '@fleet/contracts';
import { parseDeviceTopic, type Product } from '@fleet/device-protocol';
import { ConflictError, ForbiddenError, NotFoundError, optionalTimeParam, ValidationError, type CallFor, type HandlerContext, type HandlerResult, type RequestOf } from '@fleet/service-kit';
import { isSysExeTopic, readRawExeLine } from '../domain/raw-exe-line';
import { decodeRawCursor, encodeRawCursor } from '../domain/raw-cursor';
import { captureSubjects, checkTopicName, defaultRawQos, filterReach, parseTopicFilter, topicMatches } from '../domain/topic-filter';
import { fromHistory, readUntil, type CapturedMessage } from '../history/device-in-history';
import { sealSecret } from '../use-cases/seal-secret';
import type { SystemDeps } from './deps';

/** Rows per read unless asked (at most 1000, the gateway checks). */
export const RAW_READ_DEFAULT_LIMIT = 100;
/** The share of the bus's largest message the rows of one answer may take (the rest: the envelope). */
const ANSWER_SHARE = 0.75;
/**
 * How far before `since` the stream is read: it finds messages by the time it stored them,
 * rows are kept by the bridge's receive time, and the two clocks may differ slightly.
 */
const CLOCK_SKEW_MS = 5000;

type RawReach = 'global' | 'devices';

/** Which raw MQTT permission the key holds (the gateway let only these through). */
function reachOf(principal: Principal | undefined): RawReach {
  const permissions = principal?.permissions ?? [];
  if (permissions.includes('raw_mqtt_global')) return 'global';
  if (permissions.includes('raw_mqtt_devices')) return 'devices';
  throw new ForbiddenError('This API key may not use raw MQTT.', 'forbidden', 'raw_mqtt_devices');
}

const outsideDevices = (what: string): ForbiddenError =>
  new ForbiddenError(`With raw_mqtt_devices, ${what} must sit under <root>/<device id>/ of a device in your scope.`, 'forbidden', 'raw_mqtt_global');

/** raw_mqtt_devices: the device must be in the partner's scope and of the root's product (else 403; unknown devices alike). */
async function checkDeviceInScope(deps: SystemDeps, call: CallFor, principal: Principal, device: { product: Product; deviceId: string }, what: string): Promise<void> {
  let product: string | null;
  try {
    ({ product } = await deps.registry.resolveScope(call, principal, device.deviceId));
  } catch (err) {
    if (err instanceof NotFoundError) throw outsideDevices(what);
    throw err;
  }
  if (product !== device.product) throw outsideDevices(what);
}

const unavailable = (why: string): ConflictError =>
  new ConflictError(`The secret setting cannot be encrypted (${why}); nothing was sent, and it is never sent in clear.`, 'encryption_unavailable');

/**
 * The payload to publish. On a `sys/exe` topic (whatever its root) a secret `set>` is sealed for
 * the device the topic names, `<root>/<device id>/sys/exe` of a configured root: 409
 * encryption_unavailable, nothing sent, when the topic names no such device (another root, an id
 * that is not 12 upper-case hex characters, bare `sys/exe`), the registry holds no settings key
 * for it or it reported `enc: false`. Other lines go as written (readRawExeLine says which are
 * refused); other topics take any payload.
 */
async function sealedPayload(deps: SystemDeps, call: CallFor, topic: string, payload: string): Promise<string> {
  if (!isSysExeTopic(topic)) return payload;
  const line = readRawExeLine(payload);
  if (line.kind === 'as_written') return payload;
  const device = parseDeviceTopic(topic, deps.roots);
  if (!device || device.levels.length !== 2) {
    throw unavailable(`the topic names no device: a secret setting is sealed for <root>/<device id>/sys/exe, with root ${deps.roots.light} or ${deps.roots.meter} and a device id of 12 upper-case hex characters`);
  }
  let sealed: string;
  try {
    sealed = await sealSecret(deps, call, device.deviceId, line.key, line.value);
  } catch (err) {
    // A device the registry does not know has no settings key either.
    if (err instanceof NotFoundError) throw unavailable('no settings key for this device');
    throw err;
  }
  return `set>${line.key}=${sealed}`;
}

/** POST /v1/system/mqtt/messages: {topic, payload, retain?, qos?}; 202 with what the broker took. The payload is never logged. */
export async function publishRaw(deps: SystemDeps, req: RequestOf<'system.mqtt.publish'>, ctx: HandlerContext): Promise<HandlerResult> {
  const body = (req.body ?? {}) as { topic?: unknown; payload?: unknown; retain?: unknown; qos?: unknown };
  if (typeof body.topic !== 'string') throw new ValidationError("'topic' is required");
  if (typeof body.payload !== 'string') throw new ValidationError("'payload' is required");
  if (body.retain !== undefined && typeof body.retain !== 'boolean') throw new ValidationError("'retain' must be a boolean");
  if (body.qos !== undefined && body.qos !== 0 && body.qos !== 1 && body.qos !== 2) throw new ValidationError("'qos' must be 0, 1 or 2");
  const topic = body.topic;
  checkTopicName(topic);
  const call = { requestId: req.request_id, deadline: ctx.deadline };
  if (reachOf(req.principal) === 'devices') {
    const device = parseDeviceTopic(topic, deps.roots);
    if (!device) throw outsideDevices('the topic');
    await checkDeviceInScope(deps, call, req.principal as Principal, device, 'the topic');
  }
  const payload = await sealedPayload(deps, call, topic, body.payload);
  const qos = (body.qos as 0 | 1 | 2 | undefined) ?? defaultRawQos(topic);
  const retain = body.retain ?? false;
  const sent = await deps.bridge.publish(call, { topic, payload, qos, retain, qosAsGiven: true });
  return { status: 202, body: { topic: sent.topic, payload: sent.payload, sent_at: sent.sent_at, qos, retain } };
}

/** A captured message as a row of the raw read. */
function rawRow(m: CapturedMessage): Record<string, unknown> {
  return { topic: m.topic, payload: m.payload, direction: m.direction, received_at: m.receivedAt, qos: m.qos, retain: m.retain };
}

/**
 * GET /v1/system/mqtt/messages?topic=&limit=&cursor=&since=: captured traffic matching a topic
 * filter. Without cursor or since, the newest rows, newest first; with `since`, rows received at
 * or after it, oldest first; with a cursor (it wins over since), what arrived after the previous
 * answer, oldest first. `next_cursor` always follows on from what was read, never skipping a row;
 * `has_more` says more rows may wait after it.
 */
export async function readRaw(deps: SystemDeps, req: RequestOf<'system.mqtt.read'>, ctx: HandlerContext): Promise<HandlerResult> {
  const query = req.query as { topic?: string; limit?: number | string; cursor?: string; since?: string };
  if (typeof query.topic !== 'string') throw new ValidationError("'topic' is required");
  const filterText = query.topic;
  const filter = parseTopicFilter(filterText);
  const limit = query.limit === undefined ? RAW_READ_DEFAULT_LIMIT : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new ValidationError("'limit' must be an integer from 1 to 1000");
  const since = optionalTimeParam(query.since, 'since');
  const afterSeq = query.cursor === undefined ? undefined : decodeRawCursor(query.cursor, filterText);

  if (reachOf(req.principal) === 'devices') {
    const reach = filterReach(filter, deps.roots);
    if (reach.kind === 'spanning') throw new ValidationError("With raw_mqtt_devices, 'topic' must sit under one device: a literal <root>/<device id>/ without wildcards before it.");
    if (reach.kind === 'outside') throw outsideDevices("'topic'");
    await checkDeviceInScope(deps, { requestId: req.request_id, deadline: ctx.deadline }, req.principal as Principal, reach, "'topic'");
  }

  const serverNow = new Date();
  const until = readUntil(ctx);
  const subjects = captureSubjects(filter, deps.roots);
  const match = (m: CapturedMessage): boolean => topicMatches(filter, m.topic) && (afterSeq !== undefined || !since || Date.parse(m.receivedAt) >= since.getTime());
  const weigh = (m: CapturedMessage): number => Buffer.byteLength(JSON.stringify(rawRow(m)), 'utf8') + 1;
  const limits = { limit, until, match, weigh, maxWeight: Math.floor(deps.history.maxPayload * ANSWER_SHARE) };
  const answer = (rows: CapturedMessage[], position: number, hasMore: boolean): HandlerResult => ({
    status: 200,
    body: { rows: rows.map(rawRow), has_more: hasMore, next_cursor: encodeRawCursor(position, filterText), server_now: serverNow.toISOString() },
  });

  // No captured topic can match (another root, no device id): nothing to read, and a cursor at
  // the stream's end all the same.
  if (subjects.length === 0) return answer([], await fromHistory(ctx, () => deps.history.lastSeq(until)), false);
  if (afterSeq !== undefined || since) {
    const start = afterSeq !== undefined ? { afterSeq } : { atTime: new Date((since as Date).getTime() - CLOCK_SKEW_MS) };
    const page = await fromHistory(ctx, () => deps.history.forward(subjects, start, limits));
    return answer(page.messages, page.position, page.hasMore);
  }
  const newest = await fromHistory(ctx, () => deps.history.newest(subjects, limits));
  return answer(newest.messages, newest.lastSeq, false);
}
