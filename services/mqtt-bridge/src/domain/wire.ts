/**
 * Bytes the capture path writes itself, because building them through the client libraries
 * costs more than the rest of a message's capture. Pure.
 */

/** What a captured message carries as NATS headers. */
export interface CaptureHeaderFields {
  topic: string;
  /** ISO 8601 with milliseconds. */
  receivedAt: string;
  retain: boolean;
  qos: number;
  /** JetStream's deduplication id: the same id within the stream's window is stored once. */
  msgId: string;
  /** Nats-Expected-Stream: JetStream refuses the message unless this stream takes the subject. */
  stream: string;
}

/**
 * A header value cannot hold CR or LF; such a topic (odd but legal MQTT) is kept
 * percent-encoded (and then `%` too, so it decodes unambiguously).
 */
export function headerTopic(topic: string): string {
  return topic.includes('\r') || topic.includes('\n') ? topic.replace(/[\r\n%]/g, (c) => encodeURIComponent(c)) : topic;
}

/**
 * The NATS/1.0 header block of a captured message, exactly as nats.js's MsgHdrs.encode()
 * would produce it from the same headers (`Name: value` lines after the version line, an
 * empty line at the end).
 */
export function captureHeaderBlock(h: CaptureHeaderFields): Uint8Array {
  return Buffer.from(
    `NATS/1.0\r\nMqtt-Topic: ${headerTopic(h.topic)}\r\nReceived-At: ${h.receivedAt}\r\nMqtt-Retain: ${h.retain ? '1' : '0'}\r\nMqtt-Qos: ${h.qos}\r\nNats-Msg-Id: ${h.msgId}\r\nNats-Expected-Stream: ${h.stream}\r\n\r\n`,
    'utf8',
  );
}

/**
 * new Date(ms).toISOString(), computed once per distinct millisecond: a burst of messages
 * taken off the network in the same millisecond shares one string.
 */
export class IsoClock {
  private ms = Number.NaN;
  private text = '';

  iso(ms: number): string {
    if (ms !== this.ms) {
      this.ms = ms;
      this.text = new Date(ms).toISOString();
    }
    return this.text;
  }
}

/**
 * MQTT 5 PUBACKs with reason Success for the packet ids, in order, as one buffer. Each is
 * the 4-byte short form: the reason code and properties may be left out when the reason is
 * Success and there are no properties (MQTT 5.0, 3.4.2.1); the same form is MQTT 3.1.1's PUBACK.
 */
export function pubackPackets(messageIds: readonly number[]): Buffer {
  const out = Buffer.allocUnsafe(messageIds.length * 4);
  for (let i = 0; i < messageIds.length; i += 1) {
    const id = messageIds[i] as number;
    const o = i * 4;
    out[o] = 0x40;
    out[o + 1] = 0x02;
    out[o + 2] = id >> 8;
    out[o + 3] = id & 0xff;
  }
  return out;
}

/**
 * True when a JetStream publish answer is a PubAck (`{"stream":...,"seq":...}`, possibly
 * `"duplicate":true`) rather than `{"error":{...}}` or an empty status message (503: no
 * stream takes the subject). The server writes `stream` first; anything else is parsed.
 */
export function isPubAck(data: Uint8Array): boolean {
  if (startsWithPubAck(data)) return true;
  if (data.length === 0) return false;
  try {
    const answer = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8')) as { stream?: unknown; error?: unknown };
    return typeof answer.stream === 'string' && answer.error === undefined;
  } catch {
    return false;
  }
}

const PUBACK_PREFIX = Buffer.from('{"stream":', 'latin1');

function startsWithPubAck(data: Uint8Array): boolean {
  if (data.length <= PUBACK_PREFIX.length) return false;
  for (let i = 0; i < PUBACK_PREFIX.length; i += 1) if (data[i] !== PUBACK_PREFIX[i]) return false;
  return true;
}
