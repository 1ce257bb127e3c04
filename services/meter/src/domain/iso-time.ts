/**
 * Writing many instants as ISO 8601, as Date#toISOString does, without a Date per instant (an
 * answer writes thousands): the calendar date from the day number by integer arithmetic. Pure.
 */

const DAY_MS = 86_400_000;
const two = (n: number): string => (n < 10 ? `0${n}` : String(n));

/** `YYYY-MM-DDT` of a day counted from 1970-01-01 (civil calendar, H. Hinnant's days_from_civil inverse). */
function datePart(day: number): string {
  const z = day + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  const y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  // Years outside 0000-9999 are written with six digits and a sign, as toISOString does.
  if (y < 0 || y > 9999) return new Date(day * DAY_MS).toISOString().slice(0, -13);
  return `${String(y).padStart(4, '0')}-${two(m)}-${two(d)}T`;
}

/**
 * Offset minutes as ISO 8601 `±HH:MM`, or `±HH:MM:SS` for the few historic offsets with seconds
 * (Africa/Monrovia's −00:44:30 until 1972), as Temporal and java.time write them.
 */
export function isoOffset(offsetMin: number): string {
  const seconds = Math.round(Math.abs(offsetMin) * 60);
  const hhmm = `${offsetMin < 0 ? '-' : '+'}${two(Math.floor(seconds / 3600))}:${two(Math.floor(seconds / 60) % 60)}`;
  return seconds % 60 === 0 ? hhmm : `${hhmm}:${two(seconds % 60)}`;
}

/**
 * As toISOString, into bytes, remembering its last day: writes `YYYY-MM-DDTHH:MM:SS.mmmZ` (or,
 * with `toSeconds`, `YYYY-MM-DDTHH:MM:SS` alone) into `out` at `at` and returns the index past it.
 * A page of records writes two instants a record, an energy answer one a point; as strings they
 * were most of what those answers allocated.
 */
export function isoByteWriter(toSeconds = false): (ms: number, out: Uint8Array, at: number) => number {
  let day = Number.NaN;
  let date: Uint8Array = new Uint8Array(0);
  return (ms, out, at) => {
    const d = Math.floor(ms / DAY_MS);
    if (d !== day) {
      day = d;
      date = Buffer.from(datePart(d), 'latin1');
    }
    let o = at;
    for (let k = 0; k < date.length; k += 1) out[o++] = date[k] as number;
    const inDay = ms - d * DAY_MS;
    const s = Math.floor(inDay / 1000);
    o = twoDigits(out, o, Math.floor(s / 3600));
    out[o++] = 0x3a;
    o = twoDigits(out, o, Math.floor(s / 60) % 60);
    out[o++] = 0x3a;
    o = twoDigits(out, o, s % 60);
    if (toSeconds) return o;
    out[o++] = 0x2e;
    const milli = inDay % 1000;
    out[o++] = 0x30 + Math.floor(milli / 100);
    o = twoDigits(out, o, milli % 100);
    out[o++] = 0x5a;
    return o;
  };
}

function twoDigits(out: Uint8Array, at: number, n: number): number {
  out[at] = 0x30 + Math.floor(n / 10);
  out[at + 1] = 0x30 + (n % 10);
  return at + 2;
}
