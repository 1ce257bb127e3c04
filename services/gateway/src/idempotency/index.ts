export { IdempotencyStore } from './store';
export type { BeginResult, IdempotencyStoreOptions, StoredResponse } from './store';
export { canonicalJson, isValidIdempotencyKey, requestFingerprint } from './fingerprint';
