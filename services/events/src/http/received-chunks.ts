/**
 * The messages of a consumer in chunks of what has been received together, for a live stream to
 * judge them with one look-up (access/device-places.ts) instead of one per message. A chunk is
 * the next message, waited for as any message would be, with the messages already received
 * behind it: nothing waits for more, so a lone event goes out as soon as it would one by one.
 */
import type { QueuedIterator } from 'nats';

export async function* receivedChunks<T>(messages: QueuedIterator<T>, max: number): AsyncGenerator<T[]> {
  const iterator = messages[Symbol.asyncIterator]();
  try {
    for (;;) {
      const first = await iterator.next();
      if (first.done) return;
      const chunk = [first.value];
      // getPending() counts the message in hand too: more than one means another has been
      // received, and taking it settles at once (the iterator holds it; no pull, no timer).
      while (chunk.length < max && messages.getPending() > 1) {
        const next = await iterator.next();
        if (next.done) break;
        chunk.push(next.value);
      }
      yield chunk;
    }
  } finally {
    // The reader stopped (or failed): the consumer's iterator stops as a for-await would stop it.
    await iterator.return?.();
  }
}
