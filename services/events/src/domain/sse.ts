/**
 * Server-Sent Events framing of the live stream: each event is `id: <stream position>`,
 * `event: <type>` and `data: <envelope JSON>` (JSON has no raw newlines, so one data line), then a
 * blank line. The id is the event's position in PARTNER_EVENTS: a client that reconnects with
 * Last-Event-ID resumes just after it.
 */
export function sseEvent(position: number, type: string, json: string): string {
  return `id: ${position}\nevent: ${type}\ndata: ${json}\n\n`;
}

export function sseComment(text: string): string {
  return `: ${text}\n\n`;
}

/** The reconnection delay a client's EventSource should use (ms). */
export const SSE_RETRY = 'retry: 2000\n\n';
