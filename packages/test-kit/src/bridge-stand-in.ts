/**
 * A stand-in for mqtt-bridge's bus contract in tests of the services that call it (through
 * @fleet/bridge-client). It serves bridge.credential.upsert, bridge.credential.delete and
 * bridge.message.publish on the test's NATS connection (under a subject prefix if the test
 * isolates itself with one), checks every body against proto-schemas like the real bridge,
 * records what it took, and answers as the bridge does: `{}` or the publish reply; in mode
 * 'refuse' the bridge's 503s; in mode 'silent' nothing (a bridge that hangs).
 */
import { JSONCodec, type NatsConnection, type Subscription } from 'nats';
import {
  checkRequestBody,
  type BridgeCredentialDeleteBody,
  type BridgeCredentialUpsertBody,
  type BridgeMessagePublishBody,
  type RequestEnvelope,
  type RequestSubject,
} from '@fleet/contracts';

type BridgeSubject = Extract<RequestSubject, `bridge.${string}`>;

const codec = JSONCodec();

export class BridgeStandIn {
  readonly upserts: BridgeCredentialUpsertBody[] = [];
  readonly deletes: BridgeCredentialDeleteBody[] = [];
  readonly published: BridgeMessagePublishBody[] = [];
  /** Bodies that did not match their schema; each was answered 400 as the bridge would. */
  readonly malformed: Array<{ subject: BridgeSubject; body: unknown; reason: string }> = [];
  mode: 'ok' | 'refuse' | 'silent' = 'ok';
  private readonly subs: Subscription[] = [];

  constructor(nc: NatsConnection, options: { prefix?: string } = {}) {
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
      this.published.push(message);
      return { topic: message.topic, payload: message.payload, sent_at: new Date().toISOString() };
    });
  }

  /** Forgets what was recorded and goes back to answering. */
  reset(): void {
    this.upserts.length = 0;
    this.deletes.length = 0;
    this.published.length = 0;
    this.malformed.length = 0;
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
            const code = subject === 'bridge.message.publish' ? 'publish_failed' : 'broker_unavailable';
            return answer({ ok: false, error: { status: 503, code, message: 'The broker refused.', retry_after: 1 } });
          }
          const body = (codec.decode(msg.data) as RequestEnvelope).body;
          try {
            checkRequestBody(subject, body);
          } catch (err) {
            this.malformed.push({ subject, body, reason: (err as Error).message });
            return answer({ ok: false, error: { status: 400, code: 'validation_error', message: (err as Error).message } });
          }
          answer({ ok: true, status: 200, body: take(body) });
        },
      }),
    );
  }
}
