import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Collect = (options: { type: 'minor' | 'major'; execution?: 'sync' | 'async' }) => void;

/**
 * Every chunk a socket reads is a fresh buffer outside the JavaScript heap. Relaying a large
 * body allocates next to nothing on the heap, so V8 collects those chunks only once tens of
 * megabytes of them have piled up (its external-memory threshold): the process grows by about
 * that much for every large upload in flight, although it holds none of it. A young-generation
 * collection (a few milliseconds, concurrent sweeping) after every few megabytes relayed frees
 * the chunks already sent on, and the allocator reuses their memory for the next ones.
 */
const RECLAIM_EVERY_BYTES = 4 * 1024 * 1024;

let collect: Collect | null | undefined;

function collector(): Collect | null {
  if (collect !== undefined) return collect;
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === 'function') return (collect = exposed as Collect);
  try {
    setFlagsFromString('--expose-gc');
    collect = runInNewContext('gc') as Collect;
  } catch {
    collect = null;
  }
  return collect;
}

/** Counts the bytes a relay passes on and asks for a young-generation collection every RECLAIM_EVERY_BYTES. */
export function chunkReclaimer(): (bytes: number) => void {
  let sinceLast = 0;
  return (bytes) => {
    sinceLast += bytes;
    if (sinceLast < RECLAIM_EVERY_BYTES) return;
    sinceLast = 0;
    collector()?.({ type: 'minor', execution: 'async' });
  };
}
