/**
 * An array parameter as a Postgres array literal: passed as one text (cast in SQL), because the
 * client spends milliseconds serializing a JS array of a couple of thousand numbers. The cast is
 * not constant to the planner: where a row uses the array, read it once, `(SELECT $n::text::...)`.
 * Only for numbers and texts without commas, quotes or braces (ISO times among them).
 */
export const arrayLiteral = (values: Array<number | string>): string => `{${values.join(',')}}`;
