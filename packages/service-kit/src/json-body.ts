import { headers as natsHeaders, type MsgHdrs } from 'nats';
import type { ReplySuccess } from '@fleet/contracts';

/** A JSON object (bus-types' JsonObject, repeated here so the two modules do not import each other). */
type JsonObject = Record<string, unknown>;

/**
 * A reply body already written as JSON text. A handler with a large answer (a page of a
 * thousand meter records is about 600 KB) returns one, and the bus carries its bytes as they
 * are: a caller that relays replies to HTTP (the gateway, Bus.relay) writes them to the partner
 * without parsing and serializing them again, which for such a page costs more than the query.
 */
export class JsonBody {
  private constructor(readonly bytes: Uint8Array) {}

  /** The body written once, here. */
  static of(value: JsonObject): JsonBody {
    return new JsonBody(Buffer.from(JSON.stringify(value), 'utf8'));
  }

  /** Bytes that are one JSON object's text (as a JsonBody carried them). */
  static ofBytes(bytes: Uint8Array): JsonBody {
    return new JsonBody(bytes);
  }

  parse(): JsonObject {
    return JSON.parse(Buffer.from(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength).toString('utf8')) as JsonObject;
  }
}

/**
 * The two wire forms of a successful reply with a JsonBody.
 *
 * A requester that sets ACCEPT_HEADER on its request takes the split form: the envelope without
 * its body goes in the REPLY_HEADER header and the message data is the body's bytes. Any other
 * requester gets the ordinary envelope, written around the body's text (never re-serialized). So
 * a replier may use JsonBody whatever its callers' version.
 */
export const ACCEPT_HEADER = 'Fleet-Accept';
export const ACCEPT_SPLIT = 'split-reply';
export const REPLY_HEADER = 'Fleet-Reply';

export function wantsSplitReply(h: MsgHdrs | undefined): boolean {
  return h?.get(ACCEPT_HEADER) === ACCEPT_SPLIT;
}

/** The message of a reply whose body is a JsonBody, in the form the requester asked for. */
export function encodeWithJsonBody(head: ReplySuccess, body: JsonBody, split: boolean): { data: Uint8Array; headers?: MsgHdrs } {
  const headText = JSON.stringify(head);
  if (split) {
    const h = natsHeaders();
    h.set(REPLY_HEADER, headText);
    return { data: body.bytes, headers: h };
  }
  // `{"ok":true,...}` becomes `{"ok":true,...,"body":<text>}`.
  const prefix = Buffer.from(`${headText.slice(0, -1)},"body":`, 'utf8');
  return { data: Buffer.concat([prefix, body.bytes, Buffer.from('}')]) };
}

/** The head of a split reply, or undefined for a reply in the ordinary form. */
export function splitReplyHead(h: MsgHdrs | undefined): unknown {
  const text = h?.get(REPLY_HEADER);
  return text ? (JSON.parse(text) as unknown) : undefined;
}
