/**
 * UTC offsets of IANA zones, from about one Intl lookup per zone and day instead of one per
 * instant asked (a lookup costs microseconds; an energy answer asks thousands). Pure apart from
 * Intl and a bounded memo: a zone's offsets never change while the process runs.
 *
 * Offsets are worked out in blocks of 64 days: probed once a day, and where two probes differ,
 * the change is located to the second by bisection. No zone in the tz database changes its
 * offset twice within a week (1970 to 2100; the closest changes are 166 hours apart), so a day
 * between probes never hides a change that was undone before the next probe.
 */

const DAY_MS = 86_400_000;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(zone: string): Intl.DateTimeFormat {
  let dtf = formatters.get(zone);
  if (!dtf) {
    // The fields luxon reads for IANAZone.offset, so both agree to the second.
    dtf = new Intl.DateTimeFormat('en-US', {
      hour12: false,
      timeZone: zone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      era: 'short',
    });
    formatters.set(zone, dtf);
  }
  return dtf;
}

const FORMATTED = /(\d+)\/(\d+)\/(\d+) (AD|BC),? (\d+):(\d+):(\d+)/;

/** The zone's offset at the instant, in minutes east of UTC, exactly as luxon's IANAZone.offset. */
export function offsetMinutes(zone: string, ms: number): number {
  const m = FORMATTED.exec(formatterFor(zone).format(ms).replace(/\u200E/g, ''));
  if (!m) return Number.NaN;
  const [, month, day, year, era, hour, minute, second] = m;
  const local = new Date(Date.UTC(2000, Number(month) - 1, Number(day), Number(hour) === 24 ? 0 : Number(hour), Number(minute), Number(second)));
  // setUTCFullYear: Date.UTC would read years 0 to 99 as 1900 to 1999.
  local.setUTCFullYear(era === 'BC' ? 1 - Number(year) : Number(year));
  const wholeSecond = ms - (((ms % 1000) + 1000) % 1000);
  return (local.getTime() - wholeSecond) / 60_000;
}

/** An offset that is a number (a failed lookup would otherwise never equal its neighbours). */
function probe(zone: string, ms: number): number {
  const offset = offsetMinutes(zone, ms);
  if (!Number.isFinite(offset)) throw new RangeError(`no UTC offset of ${zone} at ${ms}`);
  return offset;
}

const BLOCK_MS = 64 * DAY_MS;
/** Blocks kept (each one zone's changes over 64 days): 4096 cover about 700 zone-years. */
const MAX_BLOCKS = 4096;

/** A zone's offsets over one block: changes[k] (ms) is where offsets[k] (minutes) begins; changes[0] is the block's start. */
interface Block {
  changes: number[];
  offsets: number[];
}

const blocks = new Map<string, Block>();

function blockOf(zone: string, index: number): Block {
  const key = `${zone} ${index}`;
  let block = blocks.get(key);
  if (!block) {
    block = probeBlock(zone, index * BLOCK_MS);
    // Oldest first out: enough to bound memory, as answers ask about few zones and years.
    if (blocks.size >= MAX_BLOCKS) blocks.delete(blocks.keys().next().value as string);
    blocks.set(key, block);
  }
  return block;
}

/** Probes a block day by day (blocks start on whole seconds, where offsets change). */
function probeBlock(zone: string, from: number): Block {
  const block: Block = { changes: [from], offsets: [probe(zone, from)] };
  for (let day = from; day < from + BLOCK_MS; day += DAY_MS) {
    const to = day + DAY_MS;
    const last = probe(zone, to);
    let before = block.offsets.at(-1) as number;
    let lo = day;
    // Every change between the two probes, each found to the second.
    while (before !== last) {
      let hi = to;
      while (hi - lo > 1000) {
        const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
        if (probe(zone, mid) === before) lo = mid;
        else hi = mid;
      }
      before = probe(zone, hi);
      block.changes.push(hi);
      block.offsets.push(before);
      lo = hi;
    }
  }
  return block;
}

/** Offsets of a zone by instant, in minutes as luxon's IANAZone.offset gives them. */
export interface ZoneOffsets {
  at(ms: number): number;
}

/** The zone's offsets (the zone name must be valid). */
export function offsetsOf(zone: string): ZoneOffsets {
  let index = Number.NaN;
  let block: Block = { changes: [], offsets: [] };
  return {
    at(ms) {
      const i = Math.floor(ms / BLOCK_MS);
      if (i !== index) {
        index = i;
        block = blockOf(zone, i);
      }
      let lo = 0;
      let hi = block.changes.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if ((block.changes[mid] as number) <= ms) lo = mid;
        else hi = mid - 1;
      }
      return block.offsets[lo] as number;
    },
  };
}
