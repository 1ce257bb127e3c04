/**
 * Date/time query parameters, one rule on every route of the API (`since` of the system-files
 * feeds and lists, `start`, `end` and `received_since` of the meter): ISO 8601 (no offset means
 * UTC) or epoch seconds, inside the supported range. Pure.
 */
import { ValidationError } from './errors';

/** Supported range (inclusive): 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z, epoch seconds 0 to 253402300799. */
export const TIME_MIN_MS = 0;
export const TIME_MAX_MS = 253_402_300_799_000;
/** An instant of the range as ISO 8601 to the second (`9999-12-31T23:59:59Z`). */
export const isoSeconds = (ms: number): string => new Date(ms).toISOString().replace('.000Z', 'Z');
const RANGE_TEXT = `${isoSeconds(TIME_MIN_MS)} to ${isoSeconds(TIME_MAX_MS)} (epoch seconds ${TIME_MIN_MS / 1000} to ${TIME_MAX_MS / 1000})`;

const EPOCH_SECONDS = /^-?\d{1,12}(\.\d{1,6})?$/;
/**
 * ISO 8601 date-times: a calendar date, optionally a time (hours, minutes, seconds; a fraction
 * of the last unit written) and an offset (`Z`, `±hh`, `±hh:mm`), in the extended form
 * (`2026-11-25T10:00:00Z`) or the basic one (`20261125T100000Z`), never the two mixed, but for
 * one tolerance: an extended date-time may end in a basic offset (`+0100`), as strftime's `%z`
 * and many clients write it, and as the meter routes took before this rule was shared. A date
 * alone is its midnight. The year has four digits, or a sign and six (the expanded form, as
 * Date#toISOString writes years past 9999: `+010000-01-01T00:00:00Z`), so that such a time is
 * refused as outside the supported range rather than as unreadable. Nothing else: no week date
 * (`2026-W48-4`), ordinal date (`2026-330`), year-month, time without a date, or lower-case `t`
 * and `z`. Groups: year, month, day, hour, minute, second, fraction, Z, sign, offset hours,
 * offset minutes.
 */
const ISO_FORMS = [
  /^([+-]\d{6}|\d{4})-(\d{2})-(\d{2})(?:T(\d{2})(?::(\d{2})(?::(\d{2}))?)?(?:[.,](\d{1,9}))?(?:(Z)|([+-])(\d{2})(?::?(\d{2}))?)?)?$/,
  /^([+-]\d{6}|\d{4})(\d{2})(\d{2})(?:T(\d{2})(?:(\d{2})(\d{2})?)?(?:[.,](\d{1,9}))?(?:(Z)|([+-])(\d{2})(\d{2})?)?)?$/,
];

const isLeapYear = (year: number): boolean => year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * Days from 1970-01-01 to a date of the proleptic Gregorian calendar, any year (H. Hinnant's
 * days_from_civil: years counted from March, so a leap day ends its year). Arithmetic rather
 * than Date: Date.UTC takes years 0-99 as 1900-1999, and a Date holds only about ±275760 years,
 * while an expanded year reaches ±999999.
 */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/** Milliseconds of a valid ISO 8601 date-time, or NaN. */
function isoMillis(text: string): number {
  const m = ISO_FORMS.map((form) => form.exec(text)).find((match) => match !== null);
  if (!m) return Number.NaN;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const hour = m[4] === undefined ? 0 : Number(m[4]);
  const minute = m[5] === undefined ? 0 : Number(m[5]);
  const second = m[6] === undefined ? 0 : Number(m[6]);
  if (month < 1 || month > 12 || hour > 24 || minute > 59 || second > 59) return Number.NaN;
  // 2026-02-29 and 2026-04-31 do not exist.
  const monthDays = month === 2 && isLeapYear(year) ? 29 : (MONTH_DAYS[month - 1] as number);
  if (day < 1 || day > monthDays) return Number.NaN;
  if (hour === 24 && (minute !== 0 || second !== 0 || /[1-9]/.test(m[7] ?? ''))) return Number.NaN;
  // The fraction belongs to the smallest unit written (`T10.5` is half past ten).
  const unitMs = m[6] !== undefined ? 1000 : m[5] !== undefined ? 60_000 : 3_600_000;
  const fractionMs = m[7] === undefined ? 0 : Math.round(Number(`0.${m[7]}`) * unitMs);
  let offsetMin = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]);
    const om = m[11] === undefined ? 0 : Number(m[11]);
    if (oh > 23 || om > 59) return Number.NaN;
    offsetMin = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const dayStart = daysFromCivil(year, month, day) * 86_400_000;
  return dayStart + ((hour * 60 + minute) * 60 + second) * 1000 + fractionMs - offsetMin * 60_000;
}

/**
 * A date/time query parameter: ISO 8601 (`2026-11-25T10:00:00Z`; no offset means UTC) or epoch
 * seconds (`1795000000`, up to six decimals), inside the supported range. Anything else is 400
 * naming the parameter.
 */
export function parseTimeParam(value: unknown, name: string): Date {
  const text = typeof value === 'number' ? String(value) : value;
  if (typeof text !== 'string' || text === '') throw new ValidationError(`invalid '${name}': expected an ISO 8601 date-time or epoch seconds`);
  const ms = EPOCH_SECONDS.test(text) ? Math.round(Number(text) * 1000) : isoMillis(text);
  if (!Number.isFinite(ms)) throw new ValidationError(`invalid '${name}': expected an ISO 8601 date-time or epoch seconds`);
  if (ms < TIME_MIN_MS || ms > TIME_MAX_MS) throw new ValidationError(`invalid '${name}': outside the supported range ${RANGE_TEXT}`);
  return new Date(ms);
}

/** An optional date/time query parameter: undefined when absent. */
export const optionalTimeParam = (value: unknown, name: string): Date | undefined => (value === undefined ? undefined : parseTimeParam(value, name));
