import v8 from 'node:v8';

/**
 * V8 settings for a service whose answers are large buffers: the gateway relays pages of meter
 * records (up to a megabyte), the meter writes them. Buffers live outside the JavaScript heap,
 * but V8 weighs them against the heap's limits, and only a collection frees them.
 *
 * - `growingPercent` (V8's --heap-growing-percent): how far the heap may grow past what the last
 *   full collection kept. With V8's own factor the limit sat about 10 MB above a live heap of
 *   30 MB, and a few such answers set off a full collection (incremental marking steps and a
 *   final pause, 5–15 ms each on a small machine); 200, a limit of three times the live heap,
 *   makes them about five times rarer for some 60 MB more memory.
 * - `minorGcTriggerPercent` (V8's --minor-gc-task-trigger, 80 by default): how full the young
 *   generation is when a young collection is scheduled. A service that allocates few JavaScript
 *   objects per answer (the gateway relaying a page, the meter writing one straight from
 *   Postgres' text) fills its young generation slowly, while each answer's buffers, freed by any
 *   collection, pile up until a full one comes; collecting the young generation sooner frees
 *   them at a fraction of the cost (meter 20, chosen while its energy answers built an object per
 *   point and judged again against 10 and 5 since they are written as bytes: fewer full
 *   collections, but energy reads cost more; bench/README.md, meter). The gateway, whose requests
 *   are mostly small, leaves it at V8's own and asks for young collections after large answers
 *   instead (chunkReclaimer).
 *
 * 0 leaves V8's own value. Both are read at every collection, so setting them at start-up takes
 * effect (unlike the young generation's size, fixed when the process starts).
 */
export interface HeapSettings {
  growingPercent: number;
  minorGcTriggerPercent?: number;
}

export function applyHeapSettings({ growingPercent, minorGcTriggerPercent = 0 }: HeapSettings): void {
  if (growingPercent > 0) v8.setFlagsFromString(`--heap-growing-percent=${Math.round(growingPercent)}`);
  if (minorGcTriggerPercent > 0) v8.setFlagsFromString(`--minor-gc-task-trigger=${Math.round(minorGcTriggerPercent)}`);
}
