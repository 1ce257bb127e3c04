import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * API keys have the form `<prefix>_<handle>_<secret>`. `<prefix>_<handle>` is public (shown
 * in dashboards and logs, and the lookup key); only a SHA-256 of the secret is stored.
 * The secret carries 192 random bits, so a fast hash is enough: nothing to brute-force.
 */
export const KEY_PREFIX = 'pdk';
const HANDLE_ALPHABET = 'abcdefghijkmnpqrstuvwxyz23456789';
const HANDLE_LENGTH = 12;
const KEY_PATTERN = /^([a-z]{2,10})_([a-z0-9]{6,32})_([A-Za-z0-9-]{32,128})$/;

export interface ParsedKey {
  keyPrefix: string;
  secret: string;
}

export interface IssuedKey {
  key: string;
  keyPrefix: string;
  secretHash: string;
}

export function parseApiKey(presented: string): ParsedKey | null {
  const match = KEY_PATTERN.exec(presented);
  if (!match) return null;
  return { keyPrefix: `${match[1]}_${match[2]}`, secret: match[3] as string };
}

// One-shot hashing (crypto.hash): every request checks its key, and a Hash object per call cost
// about twice as much.
export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
}

export function secretMatches(secret: string, storedHash: string): boolean {
  const presented = hash('sha256', secret, 'buffer');
  const stored = Buffer.from(storedHash, 'hex');
  return presented.length === stored.length && timingSafeEqual(presented, stored);
}

export function generateApiKey(): IssuedKey {
  const bytes = randomBytes(HANDLE_LENGTH);
  const handle = Array.from(bytes, (b) => HANDLE_ALPHABET[b % HANDLE_ALPHABET.length]).join('');
  const secret = randomBytes(24).toString('base64url').replace(/_/g, '-');
  const keyPrefix = `${KEY_PREFIX}_${handle}`;
  return { key: `${keyPrefix}_${secret}`, keyPrefix, secretHash: hashSecret(secret) };
}
