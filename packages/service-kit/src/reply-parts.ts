import { createInbox, headers as natsHeaders, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from 'nats';
import type { Logger } from './logger';

/**
 * Replies larger than the bus server's max_payload (1 MB by default), e.g. the device list of a
 * partner with thousands of devices. NATS refuses such a message outright, so the replier sends
 * the first part as the reply, with PARTS_HEADER (how many parts) and PARTS_SUBJECT_HEADER (a
 * subject only this replica serves); the requester then asks that subject for each further part
 * by its index. Parts are held until the last one is taken or PARTS_KEPT_MS passes.
 *
 * Replies that fit (nearly all) are sent as they are, with no extra header: the common path
 * costs nothing. A requester that knows nothing of parts gets the first part only and fails to
 * read it, as it would have failed to get a reply at all.
 */
export const PARTS_HEADER = 'Fleet-Parts';
export const PARTS_SUBJECT_HEADER = 'Fleet-Parts-Subject';
/** Room left in each message for its headers (the reply head of a split reply, trace context). */
const HEADER_ROOM_BYTES = 16 * 1024;
/** How long the parts of one reply wait for their requester. */
export const PARTS_KEPT_MS = 30_000;

interface HeldReply {
  parts: Uint8Array[];
  taken: number;
  timer: NodeJS.Timeout;
}

/** The replier's side: sends a reply whole when it fits, in parts when it does not. */
export class ReplySender {
  private subscription?: Subscription;
  private prefix = '';
  private count = 0;
  private readonly held = new Map<string, HeldReply>();

  constructor(
    private readonly connection: NatsConnection,
    private readonly logger: Logger,
  ) {}

  /** The most bytes of data one message may carry beside its headers. */
  partBytes(): number {
    const max = this.connection.info?.max_payload ?? 1024 * 1024;
    return Math.max(1024, max - HEADER_ROOM_BYTES);
  }

  respond(msg: Msg, data: Uint8Array, headers?: MsgHdrs): void {
    const size = this.partBytes();
    if (data.byteLength <= size) {
      msg.respond(data, headers ? { headers } : undefined);
      return;
    }
    const parts: Uint8Array[] = [];
    for (let at = 0; at < data.byteLength; at += size) parts.push(data.subarray(at, Math.min(at + size, data.byteLength)));
    const subject = this.hold(parts);
    const h = headers ?? natsHeaders();
    h.set(PARTS_HEADER, String(parts.length));
    h.set(PARTS_SUBJECT_HEADER, subject);
    msg.respond(parts[0], { headers: h });
  }

  private hold(parts: Uint8Array[]): string {
    if (!this.subscription) {
      this.prefix = createInbox();
      this.subscription = this.connection.subscribe(`${this.prefix}.*`, { callback: (_err, msg) => this.serve(msg) });
    }
    this.count += 1;
    const subject = `${this.prefix}.${this.count}`;
    const timer = setTimeout(() => this.held.delete(subject), PARTS_KEPT_MS);
    timer.unref();
    this.held.set(subject, { parts, taken: 1, timer });
    return subject;
  }

  private serve(msg: Msg): void {
    const reply = this.held.get(msg.subject);
    const index = Number(Buffer.from(msg.data).toString('utf8'));
    const part = reply && Number.isInteger(index) && index > 0 ? reply.parts[index] : undefined;
    try {
      // An empty answer says the part is gone (expired, or never held): the requester gives up.
      msg.respond(part ?? new Uint8Array(0));
    } catch (err) {
      this.logger.warn({ err }, 'a reply part could not be sent');
    }
    if (!reply || !part) return;
    reply.taken += 1;
    if (reply.taken >= reply.parts.length) {
      clearTimeout(reply.timer);
      this.held.delete(msg.subject);
    }
  }

  close(): void {
    for (const reply of this.held.values()) clearTimeout(reply.timer);
    this.held.clear();
    this.subscription?.unsubscribe();
  }
}

/**
 * The requester's side: a reply's whole data and headers, asking for the further parts of a reply
 * sent in parts, each within what is left until `deadline` (epoch milliseconds).
 */
export async function wholeReply(connection: NatsConnection, first: Msg, deadline: number): Promise<{ data: Uint8Array; headers?: MsgHdrs }> {
  const count = Number(first.headers?.get(PARTS_HEADER) ?? '');
  const subject = first.headers?.get(PARTS_SUBJECT_HEADER);
  if (!first.headers || !subject || !Number.isInteger(count) || count < 2) return { data: first.data, ...(first.headers ? { headers: first.headers } : {}) };
  const parts: Uint8Array[] = [first.data];
  for (let index = 1; index < count; index++) {
    const timeout = deadline - Date.now();
    if (timeout <= 0) throw new Error(`the reply's part ${index + 1} of ${count} did not come before the deadline`);
    const part = await connection.request(subject, Buffer.from(String(index)), { timeout });
    if (part.data.byteLength === 0) throw new Error(`the reply's part ${index + 1} of ${count} was no longer held`);
    parts.push(part.data);
  }
  return { data: Buffer.concat(parts), headers: first.headers };
}
