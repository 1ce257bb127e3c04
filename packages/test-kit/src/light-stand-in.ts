/**
 * A stand-in for light-command's calls from other services (through @fleet/light-client) in
 * tests of those services. It serves light.automation.write on the test's NATS connection (under
 * a subject prefix if the test isolates itself with one), checks every body against
 * proto-schemas as light-command's bus does, and records each write a test can then assert on.
 */
import { JSONCodec, type NatsConnection, type Subscription } from 'nats';
import { checkReplyBody, checkRequestBody, type LightAutomationWriteBody, type RequestEnvelope } from '@fleet/contracts';

type Answer = { ok: true; status: number; body: Record<string, unknown> } | { ok: false; error: { status: number; code: string; message: string } };

const codec = JSONCodec();
const SUBJECT = 'light.automation.write';

export class LightStandIn {
  /** Every write taken, in order, with when it was taken (epoch ms). */
  readonly writes: Array<LightAutomationWriteBody & { at: number }> = [];
  /** 'ok' answers; 'refuse' is the broker not taking it (503 publish_failed); 'silent' never answers. */
  mode: 'ok' | 'refuse' | 'silent' = 'ok';
  private readonly subs: Subscription[] = [];

  constructor(nc: NatsConnection, options: { prefix?: string } = {}) {
    const subject = `${options.prefix ?? ''}${SUBJECT}`;
    this.subs.push(nc.subscribe(subject, { callback: (_err, msg) => this.take(msg.data, (a) => msg.respond(codec.encode(a))) }));
  }

  /** The writes a light was sent, oldest first. */
  writesTo(deviceId: string): string[] {
    return this.writes.filter((w) => w.device_id === deviceId).map((w) => w.payload);
  }

  private take(data: Uint8Array, respond: (a: Answer) => void): void {
    if (this.mode === 'silent') return;
    if (this.mode === 'refuse') return respond({ ok: false, error: { status: 503, code: 'publish_failed', message: 'The broker did not take it.' } });
    const envelope = codec.decode(data) as RequestEnvelope;
    try {
      checkRequestBody(SUBJECT, envelope.body);
    } catch (err) {
      return respond({ ok: false, error: { status: 400, code: 'validation_error', message: (err as Error).message } });
    }
    const body = envelope.body as LightAutomationWriteBody;
    this.writes.push({ ...body, at: Date.now() });
    const reply = { device_id: body.device_id, channel: 'light1', payload: body.payload, sent_at: new Date().toISOString() };
    checkReplyBody(SUBJECT, reply);
    respond({ ok: true, status: 200, body: reply });
  }

  reset(): void {
    this.writes.length = 0;
    this.mode = 'ok';
  }

  close(): void {
    for (const sub of this.subs) sub.unsubscribe();
  }
}
