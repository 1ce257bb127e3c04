import { createHash } from 'node:crypto';

/** Idempotency-Key header: printable ASCII 0x21-0x7E, 1 to 255 characters. */
const KEY_PATTERN = /^[\x21-\x7E]{1,255}$/;

export function isValidIdempotencyKey(value: string): boolean {
  return typeof value === 'string' && KEY_PATTERN.test(value);
}

/**
 * JSON text of a value with object keys sorted recursively (code-unit order), following JSON.stringify's rules
 * otherwise: toJSON() is honoured, undefined/function/symbol members are dropped (null inside arrays),
 * non-finite numbers become null. Cycles and bigints are refused.
 */
export function canonicalJson(value: unknown): string {
  const out = canonical(value, new Set<object>());
  return out === undefined ? 'null' : out;
}

function canonical(value: unknown, stack: Set<object>): string | undefined {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON: () => unknown }).toJSON();
  }
  switch (typeof value) {
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
    case 'bigint':
      throw new TypeError('cannot fingerprint a bigint');
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : 'null';
    default:
      break;
  }
  if (value === null) return 'null';
  const obj = value as object;
  if (stack.has(obj)) throw new TypeError('cannot fingerprint a circular structure');
  stack.add(obj);
  try {
    if (Array.isArray(obj)) {
      return `[${obj.map((item: unknown) => canonical(item, stack) ?? 'null').join(',')}]`;
    }
    const record = obj as Record<string, unknown>;
    const members: string[] = [];
    for (const key of Object.keys(record).sort()) {
      const text = canonical(record[key], stack);
      if (text !== undefined) members.push(`${JSON.stringify(key)}:${text}`);
    }
    return `{${members.join(',')}}`;
  } finally {
    stack.delete(obj);
  }
}

/**
 * sha256 (hex) of the request's method, path, query and body in canonical JSON, so the order of keys
 * in the body or query does not change it but any value does. The method is compared case-insensitively.
 */
export function requestFingerprint(parts: { method: string; path: string; query: unknown; body: unknown }): string {
  const text = canonicalJson([parts.method.toUpperCase(), parts.path, parts.query ?? null, parts.body ?? null]);
  return createHash('sha256').update(text, 'utf8').digest('hex');
}
