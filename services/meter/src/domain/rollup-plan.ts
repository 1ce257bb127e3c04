/**
 * Which rollup rows and which raw records make up a window, so summary and energy answers add up
 * a few rollups instead of every record. Pure.
 *
 * Rollups (store/rollups.ts) hold the sums of the records that start in one UTC-aligned span:
 * 15-minute slots, and the same sums per UTC hour and UTC day. Every zone's offset since 1972
 * is a whole number of quarter hours, so local hours and days are made of whole slots; hours
 * and days only shorten the list. A window is cut at the bucket boundaries; each piece is
 * covered by the coarsest spans that fit inside it, and what does not fill a slot (a window
 * edge, or a boundary off the quarter hour) is read from the raw records. Every rollup row
 * then lies inside one piece, so it belongs to one bucket, and the sums equal the raw ones.
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
 * window (a summary: minimum and maximum cannot be subtracted). Adjacent ranges of the same
 * kind are merged.
 */
export function rollupReadPlan(startMs: number, endMs: number): RollupReadPlan {
  const rollups: SpanRange[] = [];
  const raw: TimeRange[] = [];
  forEachPiece(startMs, endMs, [], raw, (lo, hi) => cover(lo, hi, ROLLUP_SPANS_S.length - 1, rollups));
  return { rollups: mergeSpanRanges(rollups), raw: mergeTimeRanges(raw) };
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

/** Rollup rows counted with a sign into an explicit bucket (energy reads, below). */
export interface BucketSpanRange extends SpanRange {
  sign: 1 | -1;
  bucket: number;
}

/**
 * An energy read: `rollups` and `raw` are placed in buckets by their start (each lies inside its
 * bucket); `adjustments` are rows of a coarser span added or subtracted into a named bucket.
 */
export interface EnergyReadPlan extends RollupReadPlan {
  adjustments: BucketSpanRange[];
}

/**
 * The plan of an energy answer: the window cut at the bucket boundaries, each piece covered as
 * rollupReadPlan covers a window, but a piece may also be read as a coarser row minus what of
 * it lies outside the piece. Energy sums (whole micro-watt-hours, counts) subtract exactly, so
 * a Berlin day, 23:00 to 23:00 UTC, is the hour before midnight, the UTC day, minus its last
 * hour: three rows instead of twenty-four. Boundaries: the buckets' starts then the last end;
 * the first bucket holds the start. Rows are chosen by a cost of rows read plus index lookups
 * (COST_PER_RANGE).
 */
export function energyReadPlan(startMs: number, endMs: number, boundariesMs: readonly number[]): EnergyReadPlan {
  const rollups: SpanRange[] = [];
  const adjustments: BucketSpanRange[] = [];
  const raw: TimeRange[] = [];
  forEachPiece(startMs, endMs, boundariesMs, raw, (lo, hi, bucket) => {
    const terms: Term[] = [];
    signedCover(lo, hi, ROLLUP_SPANS_S.length - 1, 1, terms);
    for (const term of terms) {
      // Rows that start inside the piece are placed by their start; the others are named.
      if (term.sign === 1 && term.lo >= lo && term.hi - term.span < hi) rollups.push({ span: term.span, lo: term.lo, hi: term.hi });
      else adjustments.push({ ...term, bucket });
    }
  });
  return { rollups: mergeSpanRanges(rollups), adjustments, raw: mergeTimeRanges(raw) };
}

/** An index lookup costs about as much as reading two rows (measured on a year of records). */
const COST_PER_RANGE = 2;

type Term = SpanRange & { sign: 1 | -1 };

/**
 * [lo, hi) (seconds, whole slots) as a signed sum of rows of spans up to spans[level], at the
 * least cost: the cost is returned, and the terms (times `sign`) are added to `out` when given.
 * Alternatives are compared by cost alone; only the chosen one is written.
 */
function signedCover(lo: number, hi: number, level: number, sign: 1 | -1, out: Term[] | null): number {
  if (lo >= hi) return 0;
  const span = ROLLUP_SPANS_S[level] as number;
  const rows = (from: number, to: number): number => {
    out?.push({ span, lo: from, hi: to, sign });
    return (to - from) / span + COST_PER_RANGE;
  };
  if (level === 0) return rows(lo, hi);
  const finer = level - 1;
  const inner = ceilTo(lo, span);
  const outer = floorTo(hi, span);
  const flip = sign === 1 ? -1 : 1;
  if (inner > outer) {
    // Inside one row of this span: finer rows, or that row minus its parts on either side.
    const whole = outer;
    const byFiner = signedCover(lo, hi, finer, sign, null);
    const byWhole = 1 + COST_PER_RANGE + signedCover(whole, lo, finer, flip, null) + signedCover(hi, whole + span, finer, flip, null);
    if (byFiner <= byWhole) return signedCover(lo, hi, finer, sign, out);
    return rows(whole, whole + span) + signedCover(whole, lo, finer, flip, out) + signedCover(hi, whole + span, finer, flip, out);
  }
  let cost = 0;
  if (lo < inner) {
    // The part before the first whole row: finer rows, or the row holding it minus what precedes lo.
    const byFiner = signedCover(lo, inner, finer, sign, null);
    const byWhole = 1 + COST_PER_RANGE + signedCover(inner - span, lo, finer, flip, null);
    cost += byFiner <= byWhole ? signedCover(lo, inner, finer, sign, out) : rows(inner - span, inner) + signedCover(inner - span, lo, finer, flip, out);
  }
  if (inner < outer) cost += rows(inner, outer);
  if (outer < hi) {
    const byFiner = signedCover(outer, hi, finer, sign, null);
    const byWhole = 1 + COST_PER_RANGE + signedCover(hi, outer + span, finer, flip, null);
    cost += byFiner <= byWhole ? signedCover(outer, hi, finer, sign, out) : rows(outer, outer + span) + signedCover(hi, outer + span, finer, flip, out);
  }
  return cost;
}

/**
 * The window cut at the cuts inside it: each piece's edges that do not fill a slot go to `raw`,
 * and its whole slots, [lo, hi) in seconds, to `visit` with the piece's index.
 */
function forEachPiece(startMs: number, endMs: number, cutsMs: readonly number[], raw: TimeRange[], visit: (lo: number, hi: number, index: number) => void): void {
  const edges = [startMs, ...cutsMs.filter((c) => c > startMs && c < endMs), endMs];
  for (let k = 0; k + 1 < edges.length; k++) {
    const a = edges[k] as number;
    const b = edges[k + 1] as number;
    const first = ceilTo(a, SLOT_MS);
    const last = floorTo(b, SLOT_MS);
    if (first >= last) {
      raw.push({ lo: a, hi: b });
      continue;
    }
    if (a < first) raw.push({ lo: a, hi: first });
    visit(first / 1000, last / 1000, k);
    if (last < b) raw.push({ lo: last, hi: b });
  }
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

function mergeTimeRanges(ranges: TimeRange[]): TimeRange[] {
  const merged: TimeRange[] = [];
  for (const r of [...ranges].sort((x, y) => x.lo - y.lo)) {
    const prev = merged.at(-1);
    if (prev && prev.hi === r.lo) prev.hi = r.hi;
    else merged.push({ ...r });
  }
  return merged;
}
