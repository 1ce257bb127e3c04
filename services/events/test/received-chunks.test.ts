/**
 * Chunks of what a consumer has received, on the iterator nats hands a consumer's messages
 * through (an ordered consumer's `consume()` is one): its getPending() is what tells a chunk ends.
 */
import { QueuedIteratorImpl } from 'nats/lib/nats-base-client/queued_iterator';
import { receivedChunks } from '../src/http/received-chunks';

/** The next chunk if it is there before any timer or I/O could run, else 'waited'. */
const atOnce = <T>(next: Promise<IteratorResult<T[]>>) => Promise.race([next.then((r) => r.value), new Promise<'waited'>((resolve) => setImmediate(() => resolve('waited')))]);

describe('received chunks', () => {
  it('takes what was received together as one chunk, and a lone message alone without waiting for more', async () => {
    const messages = new QueuedIteratorImpl<string>();
    const chunks = receivedChunks(messages, 10);
    for (const m of ['a', 'b', 'c']) messages.push(m);
    expect(await atOnce(chunks.next())).toEqual(['a', 'b', 'c']);
    const next = chunks.next();
    expect(await atOnce(next)).toBe('waited');
    messages.push('d');
    expect(await atOnce(next)).toEqual(['d']);
    // Received while the last chunk was being judged: the next chunk.
    messages.push('e');
    messages.push('f');
    expect(await atOnce(chunks.next())).toEqual(['e', 'f']);
    await chunks.return(undefined);
  });

  it('takes at most `max` at a time, in order', async () => {
    const messages = new QueuedIteratorImpl<number>();
    for (let i = 1; i <= 5; i++) messages.push(i);
    const chunks = receivedChunks(messages, 2);
    expect([(await chunks.next()).value, (await chunks.next()).value, (await chunks.next()).value]).toEqual([[1, 2], [3, 4], [5]]);
    await chunks.return(undefined);
  });

  it('stops the consumer’s iterator when the reader stops, and ends or fails with it', async () => {
    const read = new QueuedIteratorImpl<string>();
    const reader = receivedChunks(read, 10);
    read.push('a');
    await reader.next();
    await reader.return(undefined);
    expect(read.done).toBe(true);

    const ending = new QueuedIteratorImpl<string>();
    const ended = receivedChunks(ending, 10);
    const next = ended.next();
    ending.stop();
    expect(await next).toEqual({ done: true, value: undefined });

    const failing = new QueuedIteratorImpl<string>();
    const failed = receivedChunks(failing, 10);
    const pending = failed.next();
    failing.stop(new Error('consumer deleted'));
    await expect(pending).rejects.toThrow('consumer deleted');
  });
});
