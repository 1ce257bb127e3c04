import { createHash, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * A device's broker password at rest: `scrypt$<N>$<r>$<p>$<salt>$<key>` (base64url salt and
 * key), never the password itself.
 *
 * A broker password is derived from a device's root secret or is the spec's 32 hexadecimal
 * characters, so it is never a word a person chose; the salt and scrypt's memory cost make a
 * leaked table worthless precomputed and slow to attack one guess at a time. N = 2^10 (1 MiB,
 * about 1.4 ms here) keeps provisioning thousands of devices and their connect storms cheap;
 * the parameters are stored with each hash, so they can be raised later without breaking the
 * stored ones.
 */
export interface ScryptParams {
  N: number;
  r: number;
  p: number;
}

export const DEFAULT_SCRYPT: ScryptParams = { N: 1024, r: 8, p: 1 };
const KEY_BYTES = 32;
const SALT_BYTES = 16;

function derive(password: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  const options: ScryptOptions = { N: params.N, r: params.r, p: params.p, maxmem: 256 * params.N * params.r + 1024 * 1024 };
  // The async form runs on libuv's thread pool, off the event loop.
  return new Promise((resolve, reject) => scrypt(password, salt, KEY_BYTES, options, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashBrokerPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, params);
  return ['scrypt', params.N, params.r, params.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Whether the password matches the stored hash; false for a hash in no known form. */
export async function verifyBrokerPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  if (![N, r, p].every((n) => Number.isInteger(n) && n > 0) || N > 1 << 20) return false;
  const expected = Buffer.from(parts[5] as string, 'base64url');
  const key = await derive(password, Buffer.from(parts[4] as string, 'base64url'), { N, r, p });
  return expected.length === KEY_BYTES && timingSafeEqual(key, expected);
}

/** A fixed-length digest of a secret, to compare or to key a cache without holding the secret. */
export function secretDigest(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}
