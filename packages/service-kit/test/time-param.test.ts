import { ApiError, optionalTimeParam, parseTimeParam } from '../src';

/** Date/time query parameters: ISO 8601 (no offset means UTC) or epoch seconds, one rule on every route of the API. */
describe('parseTimeParam', () => {
  it.each([
    ['1795000000', '2026-11-18T11:06:40.000Z'],
    ['1795000000.25', '2026-11-18T11:06:40.250Z'],
    ['0', '1970-01-01T00:00:00.000Z'],
    ['253402300799', '9999-12-31T23:59:59.000Z'],
    ['2026-11-25T10:00:00Z', '2026-11-25T10:00:00.000Z'],
    ['2026-11-25T10:00:00.123456Z', '2026-11-25T10:00:00.123Z'],
    ['2026-11-25T10:00:00', '2026-11-25T10:00:00.000Z'],
    ['2026-11-25T10:00', '2026-11-25T10:00:00.000Z'],
    ['2026-11-25T11:30:00+01:30', '2026-11-25T10:00:00.000Z'],
    ['2026-11-25T05:00:00-05', '2026-11-25T10:00:00.000Z'],
    ['2026-11-25T10:00:00,5Z', '2026-11-25T10:00:00.500Z'],
    ['2026-11-25', '2026-11-25T00:00:00.000Z'],
    ['20261125T100000Z', '2026-11-25T10:00:00.000Z'],
    ['20261125T113000+0130', '2026-11-25T10:00:00.000Z'],
    ['2024-02-29T00:00:00Z', '2024-02-29T00:00:00.000Z'],
    ['2026-11-25T24:00:00Z', '2026-11-26T00:00:00.000Z'],
    ['2000-02-29T00:00:00Z', '2000-02-29T00:00:00.000Z'],
    ['2026-11-25T10.5Z', '2026-11-25T10:30:00.000Z'],
    // The expanded year form (a sign and six digits), as Date#toISOString writes years past 9999.
    ['+002026-11-25T10:00:00Z', '2026-11-25T10:00:00.000Z'],
    ['+0020261125T100000Z', '2026-11-25T10:00:00.000Z'],
    ['+010000-01-01T00:00:00+14:00', '9999-12-31T10:00:00.000Z'],
    // An extended date-time with a basic offset (strftime's %z) is taken.
    ['2026-11-25T10:00:00+0100', '2026-11-25T09:00:00.000Z'],
    ['2026-11-25T10:00:00.5-0530', '2026-11-25T15:30:00.500Z'],
  ])('reads %j as %s', (text, iso) => {
    expect(parseTimeParam(text, 'since').toISOString()).toBe(iso);
  });

  it('takes a number as epoch seconds', () => {
    expect(parseTimeParam(1795000000, 'since').toISOString()).toBe('2026-11-18T11:06:40.000Z');
  });

  it.each([
    ['yesterday', /expected an ISO 8601 date-time or epoch seconds/],
    ['', /expected/],
    ['1e9', /expected/],
    ['0x10', /expected/],
    ['2026-02-29T00:00:00Z', /expected/],
    ['2026-13-01T00:00:00Z', /expected/],
    ['2026-11-25T25:00:00Z', /expected/],
    ['2026-11-25T10:60:00Z', /expected/],
    ['2026-11-25T10:00:00+24:00', /expected/],
    ['2026-1125T10:00:00Z', /expected/],
    ['2026-11-25 10:00:00Z', /expected/],
    ['2026-11-25Z', /expected/],
    ['-1', /outside the supported range/],
    ['253402300800', /outside the supported range/],
    ['1969-12-31T23:59:59Z', /outside the supported range/],
    ['0099-01-01T00:00:00Z', /outside the supported range/],
    ['2100-02-29T00:00:00Z', /expected/],
    ['2026-04-31', /expected/],
    ['+010000-01-01T00:00:00Z', /outside the supported range/],
    ['-004714-01-01T00:00:00Z', /outside the supported range/],
    // Past what a Date holds (about ±275760 years), and still read as a time out of range.
    ['-271821-04-19T00:00:00Z', /outside the supported range/],
    ['+275760-09-14T00:00:00Z', /outside the supported range/],
    ['+999999-12-31T23:59:59Z', /outside the supported range/],
    ['+10000-01-01T00:00:00Z', /expected/],
    ['010000-01-01T00:00:00Z', /expected/],
    ['10000-01-01', /expected/],
    ['+010000-02-30T00:00:00Z', /expected/],
    ['20261125T10:00:00Z', /expected/],
    ['2026-11-25T10:00:00+01:0', /expected/],
    // ISO 8601 forms besides calendar date-times are not taken, on any route (the meter's luxon once took them).
    ['2026-W48-4', /expected/],
    ['2026-W48-4T10:00:00Z', /expected/],
    ['2026-330', /expected/],
    ['2026-330T10:00:00Z', /expected/],
    ['2026-11', /expected/],
    ['10:00', /expected/],
    ['T10:00Z', /expected/],
    ['2026-11-25T100000Z', /expected/],
    ['2026-11-25t10:00:00z', /expected/],
    ['2026-11-25T10:00:00+01:00[Europe/Berlin]', /expected/],
    ['2026-11-25T10:00:00.1234567891Z', /expected/],
    ['2026-06-01T12:00:00+99:00', /expected/],
  ])('refuses %j with 400 naming the parameter', (text, reason) => {
    let thrown: unknown;
    try {
      parseTimeParam(text, 'since');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    expect(thrown).toMatchObject({ status: 400, code: 'validation_error', message: expect.stringMatching(/^invalid 'since': /) });
    expect((thrown as Error).message).toMatch(reason);
  });

  it('refuses what is not text or a number', () => {
    expect(() => parseTimeParam(undefined, 'since')).toThrow(ApiError);
    expect(() => parseTimeParam({}, 'since')).toThrow(ApiError);
  });

  it('reads an optional parameter only when it is there', () => {
    expect(optionalTimeParam(undefined, 'since')).toBeUndefined();
    expect(optionalTimeParam('0', 'since')?.getTime()).toBe(0);
    expect(() => optionalTimeParam('', 'since')).toThrow("invalid 'since'");
  });

  it('reads dates as Date writes them: every day around leap-year rules, and instants across the range', () => {
    // The calendar is computed by hand (Date cannot hold every expanded year): checked against Date's own.
    const seconds: number[] = [];
    for (const [first, last] of [[1970, 1972], [1999, 2001], [2099, 2101], [9996, 9999]] as const) {
      for (let t = Date.UTC(first, 0, 1); t < Date.UTC(last + 1, 0, 1); t += 86_400_000) seconds.push(t / 1000 + 86_399);
    }
    for (let i = 0; i < 5000; i += 1) seconds.push(Math.floor((i / 4999) * 253_402_300_799));
    for (const second of seconds) {
      const iso = new Date(second * 1000).toISOString();
      expect(parseTimeParam(iso, 'since').toISOString()).toBe(iso);
      expect(parseTimeParam(iso.replace(/[-:]/g, '').replace('.000Z', 'Z'), 'since').toISOString()).toBe(iso);
    }
  });
});
