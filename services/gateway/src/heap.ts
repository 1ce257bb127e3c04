import v8 from 'node:v8';

/**
 * How far V8 lets the gateway's heap grow past what the last full collection kept, in percent
 * (V8's --heap-growing-percent). The gateway relays answers of up to a megabyte (a page of meter
 * records) in buffers outside the JavaScript heap, and V8 weighs those against the same limit:
 * with its own factor, about 10 MB above a live heap of 30 MB, a full collection (incremental
 * marking steps and a final pause, 5–15 ms each on a small machine) came every quarter second
 * under such reads, and every request it met was that much slower. 200 (a limit of three times
 * the live heap) makes them about five times rarer for some 60 MB more memory; V8 still keeps
 * the heap under its maximum. Read at every collection, so setting it at start-up takes effect.
 */
export function applyHeapGrowing(percent: number): void {
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${Math.round(percent)}`);
}
