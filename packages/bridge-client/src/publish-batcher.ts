import { checkRequestBody, ContractViolation, validatorFor, type BridgeMessagePublishBatchBody, type BridgeMessagePublishBody, type BridgeMessagePublishReply } from '@fleet/contracts';
import { NotDeliveredError, type Bus, type CallFor, type Logger, type ServiceUnavailableError } from '@fleet/service-kit';

/** Most messages in one bridge.message.publish.batch: read from its schema's maxItems, so the two cannot drift apart. */
export const BATCH_MAX_MESSAGES = (validatorFor('bridge/message-publish-batch').schema as { properties: { messages: { maxItems: number } } }).properties.messages.maxItems;
/**
 * Most characters of topics and payloads in one batch: at three UTF-8 bytes a character at
 * worst, a batch stays well under NATS's default 1 MB message limit. A larger message goes alone.
 */
export const BATCH_MAX_CHARS = 256 * 1024;
/** After a batch reached no bridge (an older bridge, or its breaker open), messages go one by one this long. */
const UNSERVED_RETRY_MS = 10_000;

interface Queued {
  call: CallFor;
  body: BridgeMessagePublishBody;
  resolve: (published: BridgeMessagePublishReply) => void;
  reject: (err: unknown) => void;
}

export interface PublishBatcherOptions {
  bus: Bus;
  timeoutMs: number;
  logger: Logger;
  /** One message alone, as bridge.message.publish (the client's own path, with its errors). */
  publishAlone: (call: CallFor, body: BridgeMessagePublishBody) => Promise<BridgeMessagePublishReply>;
  failure: () => ServiceUnavailableError;
}

/**
 * Sends the messages published during one event-loop turn to the bridge together, as one
 * bridge.message.publish.batch request, instead of a bus request each: under load a service
 * handles many commands per turn, and each request costs a round trip through nats-server and
 * both processes' socket writes. A turn with one message sends it as bridge.message.publish,
 * so a lone command waits for nothing.
 *
 * Each caller keeps the single message's semantics: it resolves once the broker took its own
 * message and fails with publish_failed otherwise (its own refusal, or the whole request
 * failing). The batch's deadline is the earliest of its callers', so none is answered after its
 * request's time. A batch that reached no bridge (no replica serves the subject yet during a
 * rolling upgrade, or its breaker was open) is sent again message by message: nothing received it.
 * The batch request carries the trace context of its first message.
 */
export class PublishBatcher {
  private queue: Queued[] = [];
  private unservedUntil = 0;

  constructor(private readonly options: PublishBatcherOptions) {}

  publish(call: CallFor, body: BridgeMessagePublishBody): Promise<BridgeMessagePublishReply> {
    if (Date.now() < this.unservedUntil) return this.options.publishAlone(call, body);
    // Checked alone first: a body its schema refuses fails its own caller, not its batch.
    checkRequestBody('bridge.message.publish', body);
    return new Promise((resolve, reject) => {
      if (this.queue.push({ call, body, resolve, reject }) === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const now = Date.now();
    // A message whose request has run out of time is not sent, and does not cut the others' time.
    const late = this.queue.filter((item) => item.call.deadline !== undefined && item.call.deadline <= now);
    const queued = late.length === 0 ? this.queue : this.queue.filter((item) => !late.includes(item));
    this.queue = [];
    for (const item of late) {
      this.options.logger.warn({ request_id: item.call.requestId, late_ms: now - (item.call.deadline as number) }, 'message not sent to the bridge: its deadline has passed');
      item.reject(this.options.failure());
    }
    for (const group of groups(queued)) {
      if (group.length === 1) this.sendAlone(group[0] as Queued);
      else void this.sendBatch(group);
    }
  }

  private sendAlone(item: Queued): void {
    this.options.publishAlone(item.call, item.body).then(item.resolve, item.reject);
  }

  private async sendBatch(group: Queued[]): Promise<void> {
    const { bus, timeoutMs, logger, failure } = this.options;
    const first = (group[0] as Queued).call;
    const deadline = Math.min(...group.map((item) => item.call.deadline ?? Infinity));
    // A group holds two messages or more (sendAlone takes one).
    const messages = group.map((item) => ({ ...item.body, request_id: item.call.requestId })) as BridgeMessagePublishBatchBody['messages'];
    let reply;
    try {
      reply = await bus.request(
        'bridge.message.publish.batch',
        { request_id: first.requestId, params: {}, query: {}, body: { messages } },
        { timeoutMs, ...(Number.isFinite(deadline) ? { deadline } : {}) },
      );
    } catch (err) {
      if (err instanceof NotDeliveredError) {
        this.unservedUntil = Date.now() + UNSERVED_RETRY_MS;
        for (const item of group) this.sendAlone(item);
        return;
      }
      if (!(err instanceof ContractViolation)) logger.warn({ err, request_ids: messages.map((m) => m.request_id) }, 'bridge not reached');
      for (const item of group) item.reject(err instanceof ContractViolation ? err : failure());
      return;
    }
    const results = reply.ok ? reply.body?.results : undefined;
    if (!reply.ok || !results || results.length !== group.length) {
      const reason = reply.ok ? `${results?.length ?? 'no'} outcomes for ${group.length} messages` : reply.error.message;
      logger.warn({ reason, request_ids: messages.map((m) => m.request_id) }, 'bridge refused');
      for (const item of group) item.reject(failure());
      return;
    }
    group.forEach((item, k) => {
      const result = results[k] as (typeof results)[number];
      if ('sent_at' in result) {
        item.resolve({ topic: item.body.topic, payload: item.body.payload, sent_at: result.sent_at });
      } else {
        logger.warn({ request_id: item.call.requestId, status: result.error.status, code: result.error.code, reason: result.error.message }, 'bridge refused');
        item.reject(failure());
      }
    });
  }
}

/** The queued messages in batches of at most BATCH_MAX_MESSAGES and about BATCH_MAX_CHARS, in order. */
function groups(queued: Queued[]): Queued[][] {
  const out: Queued[][] = [];
  let current: Queued[] = [];
  let chars = 0;
  for (const item of queued) {
    const size = item.body.topic.length + item.body.payload.length;
    if (current.length > 0 && (current.length === BATCH_MAX_MESSAGES || chars + size > BATCH_MAX_CHARS)) {
      out.push(current);
      current = [];
      chars = 0;
    }
    current.push(item);
    chars += size;
  }
  if (current.length > 0) out.push(current);
  return out;
}
