import { createInbox, ErrorCode, type Msg, type MsgHdrs, type NatsConnection, type NatsError, type PublishOptions, type Subscription } from 'nats';
import type { Logger } from '@fleet/service-kit';
import { captureSubject, type DeviceTopic, type Direction } from '../domain/topics';
import { captureHeaderBlock, IsoClock, isPubAck } from '../domain/wire';

export interface CapturedMessage {
  topic: string;
  device: DeviceTopic;
  payload: Uint8Array;
  qos: number;
  retain: boolean;
  /** Epoch ms when the bridge took it off the network (or the broker took it, for dev.out). */
  at: number;
}

/**
 * stored: DEVICE_IN has it (a PubAck, possibly a duplicate of an earlier attempt).
 * skipped: it never will (NATS refuses it for good, e.g. too large); acknowledge it anyway.
 * abandoned: not stored, and the owner no longer wants it tried (its MQTT connection went, or
 * the bridge is stopping): the broker sends a QoS 1 message again on the resumed session.
 */
export type CaptureOutcome = 'stored' | 'skipped' | 'abandoned';

/** Whoever asked for a capture: told the outcome once, asked before every retry. */
export interface CaptureOwner {
  captureDone(outcome: CaptureOutcome, reason?: string): void;
  retryWanted(): boolean;
}

export interface DeviceInWriterOptions {
  nc: NatsConnection;
  subjectPrefix: string;
  stream: string;
  /** Start of the Nats-Msg-Id of dev.out captures; unique per process. */
  outMsgIdPrefix: string;
  logger: Logger;
  /** A publish without a PubAck after this long is tried again. */
  ackTimeoutMs?: number;
  /** How often pending captures are checked for timeouts and due retries. */
  sweepMs?: number;
  /** Called when JetStream answered that no stream takes a capture's subject (it is retried). */
  onNoStream?: () => void;
}

/** NATS errors that retrying cannot fix: the capture is skipped (logged). */
const PERMANENT = new Set<string>([ErrorCode.MaxPayloadExceeded, ErrorCode.BadHeader, ErrorCode.BadSubject, ErrorCode.BadPayload, ErrorCode.InvalidPayload]);
const RETRY_BASE_MS = 100;
const RETRY_MAX_MS = 2000;

/** A capture between its first publish and its outcome. */
class PendingCapture {
  attempts = 0;
  /** Waiting for a PubAck until `deadline`; otherwise waiting to publish again at `deadline`. */
  awaitingAck = false;
  deadline = 0;

  constructor(
    readonly subject: string,
    readonly payload: Uint8Array,
    readonly headers: Uint8Array,
    readonly topic: string,
    readonly owner: CaptureOwner,
  ) {}
}

/**
 * nats.js's publish() only calls headers.encode() (nats.js 2.x ProtocolHandler.publish), so
 * one carrier holding the bytes of the message being published stands in for a MsgHdrs built
 * per message; the bytes are the header block nats.js would encode (see captureHeaderBlock).
 */
class EncodedHeaders {
  bytes: Uint8Array = new Uint8Array(0);
  encode(): Uint8Array {
    return this.bytes;
  }
}

/**
 * Writes device traffic into DEVICE_IN: subject dev.<in|out>.<product>.<device>.<levels>, the
 * raw payload, the MQTT facts as headers, and a Nats-Msg-Id that stays the same across
 * retries of one capture, so JetStream stores a retried capture once (within its dedupe window).
 *
 * Each message is a plain core-NATS publish with a reply subject `<inbox>.<n>`; JetStream
 * answers it with the PubAck, and all answers arrive on one wildcard subscription. Pending
 * captures sit in a map keyed by n, and one periodic sweep handles timeouts and retries. A
 * JetStream request per message would cost a promise, a timer, a subscription entry and (in
 * nats.js) Error objects for every message.
 */
export class DeviceInWriter {
  private readonly nc: NatsConnection;
  private readonly pending = new Map<number, PendingCapture>();
  private readonly inbox = `${createInbox()}.`;
  private readonly ackTimeoutMs: number;
  private readonly carrier = new EncodedHeaders();
  private readonly publishOptions: PublishOptions = { reply: '', headers: this.carrier as unknown as MsgHdrs };
  private readonly clock = new IsoClock();
  private seq = 0;
  private outCount = 0;
  private sub?: Subscription;
  private sweeper?: NodeJS.Timeout;

  constructor(private readonly options: DeviceInWriterOptions) {
    this.nc = options.nc;
    this.ackTimeoutMs = options.ackTimeoutMs ?? 5000;
  }

  start(): void {
    this.sub = this.nc.subscribe(`${this.inbox}*`, { callback: (err, msg) => this.onAnswer(err, msg) });
    this.sweeper = setInterval(() => this.sweep(), this.options.sweepMs ?? 100);
    this.sweeper.unref();
  }

  /** Captures waiting for their PubAck or a retry. */
  get size(): number {
    return this.pending.size;
  }

  /** Stores the message; the owner hears the outcome once (possibly before this returns). */
  capture(direction: Direction, message: CapturedMessage, msgId: string, owner: CaptureOwner): void {
    const headers = captureHeaderBlock({
      topic: message.topic,
      receivedAt: this.clock.iso(message.at),
      retain: message.retain,
      qos: message.qos,
      msgId,
      stream: this.options.stream,
    });
    const pending = new PendingCapture(captureSubject(this.options.subjectPrefix, direction, message.device), message.payload, headers, message.topic, owner);
    const seq = ++this.seq;
    this.pending.set(seq, pending);
    this.send(seq, pending);
  }

  /** One capture (no retry: a message sent to a device is not sent again); resolves once stored. */
  write(direction: Direction, message: CapturedMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      this.capture(direction, message, `${this.options.outMsgIdPrefix}${++this.outCount}`, {
        captureDone: (outcome, reason) => (outcome === 'stored' ? resolve() : reject(new Error(reason ?? `not stored (${outcome})`))),
        retryWanted: () => false,
      });
    });
  }

  /** Stops the sweep and the PubAck subscription; captures still pending are abandoned. */
  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    for (const [seq, pending] of this.pending) this.finish(seq, pending, 'abandoned', 'capture stopped');
    if (!this.nc.isClosed()) this.sub?.unsubscribe();
  }

  private send(seq: number, pending: PendingCapture): void {
    pending.awaitingAck = true;
    pending.deadline = Date.now() + this.ackTimeoutMs;
    try {
      this.carrier.bytes = pending.headers;
      this.publishOptions.reply = this.inbox + seq;
      this.nc.publish(pending.subject, pending.payload, this.publishOptions);
    } catch (err) {
      // Thrown before anything was sent (too large, bad subject, connection closed).
      const { code, message } = err as NatsError;
      if (PERMANENT.has(code)) {
        this.options.logger.error({ err: message, topic: pending.topic, bytes: pending.payload.length }, 'device message cannot be captured; dropped');
        this.finish(seq, pending, 'skipped', message);
      } else {
        this.failed(seq, pending, message);
      }
    }
  }

  private onAnswer(err: NatsError | null, msg: Msg): void {
    if (err) {
      this.options.logger.error({ err: err.message }, 'PubAck subscription failed');
      return;
    }
    const seq = Number(msg.subject.slice(this.inbox.length));
    const pending = this.pending.get(seq);
    // An answer to an attempt that already timed out still counts: any PubAck means stored.
    if (!pending) return;
    if (isPubAck(msg.data)) {
      this.finish(seq, pending, 'stored');
      return;
    }
    if (msg.data.length === 0 && msg.headers?.code === 503) this.options.onNoStream?.();
    this.failed(seq, pending, describeAnswer(msg));
  }

  /** A failed attempt: try again after a backoff while the owner wants it, else give it up. */
  private failed(seq: number, pending: PendingCapture, reason: string): void {
    pending.attempts += 1;
    if (!pending.owner.retryWanted()) {
      this.finish(seq, pending, 'abandoned', reason);
      return;
    }
    if (pending.attempts === 1 || pending.attempts % 20 === 0) {
      this.options.logger.warn({ err: reason, topic: pending.topic, attempts: pending.attempts }, 'device message not stored yet; retrying');
    }
    pending.awaitingAck = false;
    pending.deadline = Date.now() + Math.min(RETRY_BASE_MS * 2 ** (pending.attempts - 1), RETRY_MAX_MS);
  }

  private finish(seq: number, pending: PendingCapture, outcome: CaptureOutcome, reason?: string): void {
    this.pending.delete(seq);
    pending.owner.captureDone(outcome, reason);
  }

  private sweep(): void {
    const now = Date.now();
    for (const [seq, pending] of this.pending) {
      if (now < pending.deadline) continue;
      if (pending.awaitingAck) this.failed(seq, pending, `no PubAck within ${this.ackTimeoutMs} ms`);
      else if (pending.owner.retryWanted()) this.send(seq, pending);
      else this.finish(seq, pending, 'abandoned', 'given up');
    }
  }
}

function describeAnswer(msg: Msg): string {
  if (msg.data.length === 0) return `JetStream status ${msg.headers?.code ?? '?'} ${msg.headers?.description ?? ''}`.trim();
  try {
    const answer = JSON.parse(Buffer.from(msg.data).toString('utf8')) as { error?: { code?: number; err_code?: number; description?: string } };
    return answer.error ? `JetStream error ${answer.error.code ?? '?'}/${answer.error.err_code ?? '?'}: ${answer.error.description ?? ''}` : 'unexpected answer';
  } catch {
    return 'unreadable answer';
  }
}
