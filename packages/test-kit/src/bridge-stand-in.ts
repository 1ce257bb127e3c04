/**
 * A stand-in for mqtt-bridge's bus contract in tests of the services that call it (through
 * @fleet/bridge-client). It serves bridge.credential.upsert, bridge.credential.delete and
 * bridge.message.publish (and bridge.message.publish.batch, unless `serveBatch: false` makes it
 * an older bridge) on the test's NATS connection (under a subject prefix if the test isolates
 * itself with one), checks every body against proto-schemas like the real bridge, records what
 * it took, and answers as the bridge does: `{}` or the publish reply; in mode 'refuse' the
 * bridge's 503s; in mode 'silent' nothing (a bridge that hangs). A message to a topic in
 * `refusedTopics` is refused alone (503 publish_failed), as the broker refusing it would be.
 */
import { JSONCodec, type NatsConnection, type Subscription } from 'nats';
import {
  checkRequestBody,
  type BridgeCredentialDeleteBody,
  type BridgeCredentialUpsertBody,
  type BridgeMessagePublishBatchBody,
  type BridgeMessagePublishBody,
  type RequestEnvelope,
  type RequestSubject,
} from '@fleet/contracts';

type BridgeSubject = Extract<RequestSubject, `bridge.${string}`>;

const codec = JSONCodec();
/** The bridge's answer to a message the broker did not take. */
const refusal = { error: { status: 503, code: 'publish_failed', message: 'The broker could not take the message.' } };

export class BridgeStandIn {
  readonly upserts: BridgeCredentialUpsertBody[] = [];
  readonly deletes: BridgeCredentialDeleteBody[] = [];
  readonly published: BridgeMessagePublishBody[] = [];
  /** Messages per batch request taken, in order. */
  readonly batches: number[] = [];
  readonly refusedTopics = new Set<string>();
  /** Bodies that did not match their schema; each was answered 400 as the bridge would. */
  readonly malformed: Array<{ subject: BridgeSubject; body: unknown; reason: string }> = [];
  mode: 'ok' | 'refuse' | 'silent' = 'ok';
  private readonly subs: Subscription[] = [];

  constructor(nc: NatsConnection, options: { prefix?: string; serveBatch?: boolean } = {}) {
    const prefix = options.prefix ?? '';
    this.serve(nc, `${prefix}bridge.credential.upsert`, 'bridge.credential.upsert', (body) => {
      this.upserts.push(body as BridgeCredentialUpsertBody);
      return {};
    });
    this.serve(nc, `${prefix}bridge.credential.delete`, 'bridge.credential.delete', (body) => {
      this.deletes.push(body as BridgeCredentialDeleteBody);
      return {};
    });
    this.serve(nc, `${prefix}bridge.message.publish`, 'bridge.message.publish', (body) => {
      const message = body as BridgeMessagePublishBody;
      if (this.refusedTopics.has(message.topic)) return refusal;
      this.published.push(message);
      return { topic: message.topic, payload: message.payload, sent_at: new Date().toISOString() };
    });
    if (options.serveBatch === false) return;
    this.serve(nc, `${prefix}bridge.message.publish.batch`, 'bridge.message.publish.batch', (body) => {
      const { messages } = body as BridgeMessagePublishBatchBody;
      this.batches.push(messages.length);
      const results = messages.map(({ request_id: _requestId, ...message }) => {
        if (this.refusedTopics.has(message.topic)) return { error: refusal.error };
        this.published.push(message);
        return { sent_at: new Date().toISOString() };
      });
      return { results };
    });
  }

  /** Forgets what was recorded and goes back to answering. */
  reset(): void {
    this.upserts.length = 0;
    this.deletes.length = 0;
    this.published.length = 0;
    this.malformed.length = 0;
    this.batches.length = 0;
    this.refusedTopics.clear();
    this.mode = 'ok';
  }

  close(): void {
    for (const sub of this.subs) sub.unsubscribe();
  }

  private serve(nc: NatsConnection, on: string, subject: BridgeSubject, take: (body: unknown) => Record<string, unknown>): void {
    this.subs.push(
      nc.subscribe(on, {
        callback: (_err, msg) => {
          if (this.mode === 'silent') return;
          const answer = (value: unknown) => msg.respond(codec.encode(value));
          if (this.mode === 'refuse') {
            const code = subject.startsWith('bridge.message.') ? 'publish_failed' : 'broker_unavailable';
            return answer({ ok: false, error: { status: 503, code, message: 'The broker refused.', retry_after: 1 } });
          }
          const body = (codec.decode(msg.data) as RequestEnvelope).body;
          try {
            checkRequestBody(subject, body);
          } catch (err) {
            this.malformed.push({ subject, body, reason: (err as Error).message });
            return answer({ ok: false, error: { status: 400, code: 'validation_error', message: (err as Error).message } });
          }
          const taken = take(body);
          answer(taken === refusal ? { ok: false, ...refusal } : { ok: true, status: 200, body: taken });
        },
      }),
    );
  }
}
