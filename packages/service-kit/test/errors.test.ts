import { isStoreOutage, toEnvelopeError, ValidationError } from '../src';

describe('toEnvelopeError', () => {
  it('keeps an ApiError as it is', () => {
    expect(toEnvelopeError(new ValidationError('bad name'))).toMatchObject({ status: 400, code: 'validation_error', message: 'bad name' });
  });

  it('answers a database that cannot be reached as 503, however the driver wrapped it', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const adapter = { name: 'DriverAdapterError', message: 'x', meta: { driverAdapterError: { cause: { kind: 'ConnectionClosed' } } } };
    const shutdown = new Error('wrapped', { cause: Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }) });
    const poolTimeout = new Error('timeout exceeded when trying to connect');
    const noDatabase = Object.assign(new Error('database "x" does not exist'), { code: '3D000' });
    for (const err of [refused, adapter, shutdown, new Error('outer', { cause: new Error('Connection terminated unexpectedly') }), poolTimeout, noDatabase]) {
      expect(isStoreOutage(err)).toBe(true);
      expect(toEnvelopeError(err)).toMatchObject({ status: 503, code: 'service_unavailable' });
    }
  });

  it('answers a value Postgres refused (SQLSTATE class 22) as 400', () => {
    const nul = { name: 'DriverAdapterError', message: 'x', meta: { driverAdapterError: { cause: { originalCode: '22021' } } } };
    expect(toEnvelopeError(nul)).toMatchObject({ status: 400, code: 'validation_error' });
  });

  it('answers anything else as a 500 that says nothing of the cause', () => {
    for (const err of [new TypeError('undefined is not a function'), new Error('duplicate key value violates unique constraint'), undefined, 'text']) {
      expect(isStoreOutage(err)).toBe(false);
      expect(toEnvelopeError(err)).toEqual({ status: 500, code: 'internal_error', message: 'Internal error.' });
    }
  });
});
