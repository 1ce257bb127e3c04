import { readConfigAlertingConfig } from '../src/config';

describe('configuration', () => {
  it('leases a shard for half the period unless told, and refuses a lease as long as the period', () => {
    expect(readConfigAlertingConfig({}).EVALUATION_LEASE_MS).toBe(60_000);
    expect(readConfigAlertingConfig({ EVALUATION_PERIOD_MS: '3000' }).EVALUATION_LEASE_MS).toBe(1500);
    expect(readConfigAlertingConfig({ EVALUATION_PERIOD_MS: '3000', EVALUATION_LEASE_MS: '1000' }).EVALUATION_LEASE_MS).toBe(1000);
    expect(() => readConfigAlertingConfig({ EVALUATION_PERIOD_MS: '3000', EVALUATION_LEASE_MS: '3000' })).toThrow(/EVALUATION_LEASE_MS \(3000\) must be shorter than EVALUATION_PERIOD_MS/);
  });
});
