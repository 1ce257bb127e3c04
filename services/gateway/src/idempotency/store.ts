import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

export type BeginResult =
  | { kind: 'started' } // caller must run the request, then complete() or release()
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'in_progress'; retryAfterSeconds: number }
  | { kind: 'mismatch' }; // same key, different request -> 422 idempotency_key_reused

export interface IdempotencyStoreOptions {
  /** Prefix of the Redis keys; default 'idem:'. */
  keyPrefix?: string;
  /** How long a 2xx response is kept for replay; default 86400 (24 hours). */
  retentionSeconds?: number;
  /** How long a running request holds its key; a crashed request's lock expires after this. Default 60. */
  lockSeconds?: number;
}

/** Retry-After given to a repeat that arrives while the first request still runs. */
const IN_PROGRESS_RETRY_AFTER_SECONDS = 1;

/**
 * Record: a hash with state ('running' | 'done'), fp (request fingerprint) and, when done, response (JSON text).
 * KEYS[1] record; ARGV fingerprint, lock ms. Replies {'started'} | {'mismatch'} | {'in_progress'} | {'replay', json}.
 */
const BEGIN_LUA = `
local rec = redis.call('HMGET', KEYS[1], 'state', 'fp', 'response')
if not rec[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'state', 'running', 'fp', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'started'}
end
if rec[2] ~= ARGV[1] then return {'mismatch'} end
if rec[1] == 'running' then return {'in_progress'} end
return {'replay', rec[3] or 'null'}
`;

/**
 * KEYS[1] record; ARGV fingerprint, keep ('1' for a 2xx), response JSON, retention seconds.
 * A 2xx is kept when the key is still held by this request, or when its lock expired meanwhile (nobody else took it).
 * Anything else forgets the key if this request still holds it. Replies 1 when it changed the record.
 */
const COMPLETE_LUA = `
local rec = redis.call('HMGET', KEYS[1], 'state', 'fp')
local mine = rec[1] == 'running' and rec[2] == ARGV[1]
if ARGV[2] == '1' then
  if mine or not rec[1] then
    redis.call('DEL', KEYS[1])
    redis.call('HSET', KEYS[1], 'state', 'done', 'fp', ARGV[1], 'response', ARGV[3])
    redis.call('EXPIRE', KEYS[1], ARGV[4])
    return 1
  end
  return 0
end
if mine then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`;

/** KEYS[1] record. Forgets it only while it is still running (a kept response is never dropped). */
const RELEASE_LUA = `
if redis.call('HGET', KEYS[1], 'state') == 'running' then
  return redis.call('DEL', KEYS[1])
end
return 0
`;

type ScriptingRedis = Redis & {
  fleetIdempotencyBegin(key: string, fingerprint: string, lockMs: number): Promise<unknown>;
  fleetIdempotencyComplete(key: string, fingerprint: string, keep: string, response: string, retentionSeconds: number): Promise<unknown>;
  fleetIdempotencyRelease(key: string): Promise<unknown>;
};

function positiveInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be an integer >= 1`);
  return value;
}

function parseStored(text: string): StoredResponse {
  const parsed = JSON.parse(text) as Partial<StoredResponse> | null;
  if (parsed === null || typeof parsed !== 'object' || typeof parsed.status !== 'number') {
    throw new Error('corrupt idempotency record');
  }
  return { status: parsed.status, headers: parsed.headers ?? {}, body: parsed.body };
}

/**
 * Idempotency-Key records in Redis. A key is scoped by `scope` (`<partner>:<route id>`, built by the caller);
 * the Redis key name is a sha256 of scope and key, so any key characters are safe.
 */
export class IdempotencyStore {
  private readonly redis: ScriptingRedis;
  private readonly keyPrefix: string;
  private readonly retentionSeconds: number;
  private readonly lockSeconds: number;

  constructor(redis: Redis, opts: IdempotencyStoreOptions = {}) {
    this.keyPrefix = opts.keyPrefix ?? 'idem:';
    this.retentionSeconds = positiveInteger('retentionSeconds', opts.retentionSeconds ?? 86_400);
    this.lockSeconds = positiveInteger('lockSeconds', opts.lockSeconds ?? 60);
    redis.defineCommand('fleetIdempotencyBegin', { lua: BEGIN_LUA, numberOfKeys: 1 });
    redis.defineCommand('fleetIdempotencyComplete', { lua: COMPLETE_LUA, numberOfKeys: 1 });
    redis.defineCommand('fleetIdempotencyRelease', { lua: RELEASE_LUA, numberOfKeys: 1 });
    this.redis = redis as ScriptingRedis;
  }

  /** The Redis key of a record (exposed for tests and operations). */
  redisKey(scope: string, key: string): string {
    return this.keyPrefix + createHash('sha256').update(JSON.stringify([scope, key]), 'utf8').digest('hex');
  }

  /** Claims the key for this request, or tells why not. Atomic: concurrent begins yield exactly one 'started'. */
  async begin(scope: string, key: string, fingerprint: string): Promise<BeginResult> {
    const reply = await this.redis.fleetIdempotencyBegin(this.redisKey(scope, key), fingerprint, this.lockSeconds * 1000);
    const [kind, payload] = Array.isArray(reply) ? (reply as unknown[]) : [];
    switch (kind) {
      case 'started':
        return { kind: 'started' };
      case 'mismatch':
        return { kind: 'mismatch' };
      case 'in_progress':
        return { kind: 'in_progress', retryAfterSeconds: IN_PROGRESS_RETRY_AFTER_SECONDS };
      case 'replay':
        return { kind: 'replay', response: parseStored(String(payload)) };
      default:
        throw new Error('unexpected reply from the idempotency script');
    }
  }

  /** Keeps a 2xx response for retentionSeconds; any other status forgets the key so the same key runs again. */
  async complete(scope: string, key: string, fingerprint: string, response: StoredResponse): Promise<void> {
    const keep = response.status >= 200 && response.status <= 299;
    const json = keep ? JSON.stringify({ status: response.status, headers: response.headers, body: response.body }) : '';
    await this.redis.fleetIdempotencyComplete(this.redisKey(scope, key), fingerprint, keep ? '1' : '0', json, this.retentionSeconds);
  }

  /** Forgets an in-progress key (the request failed before producing a response). */
  async release(scope: string, key: string): Promise<void> {
    await this.redis.fleetIdempotencyRelease(this.redisKey(scope, key));
  }
}
