import { ApiError } from '@fleet/service-kit';
import { parseTimeParam } from '../src/domain/time-param';

/** Date/time query parameters: ISO 8601 (no offset means UTC) or epoch seconds, as on every route of the API. */
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
});
