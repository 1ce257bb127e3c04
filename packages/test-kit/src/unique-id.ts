import { randomBytes } from 'node:crypto';

/** A short lowercase id that is unique enough to isolate one test run's names. */
export function uniqueId(prefix = 't'): string {
  return `${prefix}${Date.now().toString(36)}${randomBytes(4).toString('hex')}`;
}
