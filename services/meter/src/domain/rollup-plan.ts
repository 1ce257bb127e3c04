/**
 * Which rollup rows and which raw records make up a summary's window, so it adds up a few
 * rollups instead of every record. Pure.
 *
 * Rollups (store/rollups.ts) hold the sums of the records that start in one UTC-aligned span:
 * 15-minute slots, and the same sums per UTC hour and UTC day. Every zone's offset since 1972
 * is a whole number of quarter hours, so local hours and days are made of whole slots; hours
 * and days only shorten the list. The window is covered by the coarsest spans that fit inside
 * it, and what does not fill a slot (its edges) is read from the raw records. (Energy answers
 * read running day sums instead: domain/day-energy.ts.)
 */

/** Rollup spans in seconds, finest first. */
export const ROLLUP_SPANS_S = [900, 3600, 86_400] as const;
const SLOT_MS = ROLLUP_SPANS_S[0] * 1000;

/** Rollup rows of one span whose start lies in [lo, hi) (epoch seconds, multiples of span). */
export interface SpanRange {
  span: number;
  lo: number;
  hi: number;
}

/** Raw records whose start lies in [lo, hi) (epoch milliseconds). */
export interface TimeRange {
  lo: number;
  hi: number;
}

export interface RollupReadPlan {
  rollups: SpanRange[];
  raw: TimeRange[];
}

const floorTo = (x: number, m: number): number => Math.floor(x / m) * m;
const ceilTo = (x: number, m: number): number => Math.ceil(x / m) * m;

/**
 * The rollup rows and raw ranges covering [startMs, endMs) exactly once, every row inside the
 * window (minimum and maximum cannot be subtracted). Adjacent ranges of the same span are merged.
 */
export function rollupReadPlan(startMs: number, endMs: number): RollupReadPlan {
  const rollups: SpanRange[] = [];
  const raw: TimeRange[] = [];
  const first = ceilTo(startMs, SLOT_MS);
  const last = floorTo(endMs, SLOT_MS);
  if (first >= last) raw.push({ lo: startMs, hi: endMs });
  else {
    if (startMs < first) raw.push({ lo: startMs, hi: first });
    cover(first / 1000, last / 1000, ROLLUP_SPANS_S.length - 1, rollups);
    if (last < endMs) raw.push({ lo: last, hi: endMs });
  }
  return { rollups: mergeSpanRanges(rollups), raw };
}

/** [lo, hi) (seconds, whole slots) by the coarsest spans that fit, up to spans[level]. */
function cover(lo: number, hi: number, level: number, out: SpanRange[]): void {
  if (lo >= hi) return;
  const span = ROLLUP_SPANS_S[level] as number;
  if (level === 0) {
    out.push({ span, lo, hi });
    return;
  }
  const inner = ceilTo(lo, span);
  const outer = floorTo(hi, span);
  if (inner >= outer) {
    cover(lo, hi, level - 1, out);
    return;
  }
  cover(lo, inner, level - 1, out);
  out.push({ span, lo: inner, hi: outer });
  cover(outer, hi, level - 1, out);
}

function mergeSpanRanges(ranges: SpanRange[]): SpanRange[] {
  const sorted = [...ranges].sort((x, y) => x.span - y.span || x.lo - y.lo);
  const merged: SpanRange[] = [];
  for (const r of sorted) {
    const prev = merged.at(-1);
    if (prev && prev.span === r.span && prev.hi === r.lo) prev.hi = r.hi;
    else merged.push({ ...r });
  }
  return merged;
}
