import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/** One rate-limit window: at most `limit` events in any `windowMs` span, counted under `key`. */
export interface WindowSpec {
  key: string;
  limit: number;
  windowMs: number;
}

/** The state of one window after a hit or peek; feeds the RateLimit-* and Retry-After headers. */
export interface WindowState {
  key: string;
  limit: number;
  /** Events the window still admits (after this one, on an admitted hit); never negative; 0 when refused. */
  remaining: number;
  /** Whole seconds until the oldest counted event leaves the window; 0 when nothing is counted. */
  resetSeconds: number;
  /** Whole seconds (>= 1) until the window admits an event again; 0 when it admits one now. */
  retryAfterSeconds: number;
  allowed: boolean;
}

export interface HitResult {
  allowed: boolean;
  /** One state per requested window, in the order given. */
  windows: WindowState[];
  /** Names the counted event for refund(); present when a hit was counted. */
  receipt?: string;
  /** The refusing window that frees up last (largest retryAfterSeconds); absent when allowed. */
  refusedBy?: WindowState;
}

/**
 * KEYS: one sorted set per window. ARGV: mode ('hit' | 'peek'), member suffix, then limit,
 * windowMs and stage (1, 2, ...) per key, keys in stage order.
 * Scores are Redis TIME in microseconds, so every gateway replica shares one clock.
 * An event at score t is inside the window while now - t < window.
 * A hit counts the event in each stage's windows when all of that stage's windows and every
 * earlier stage admit it: stage 1 can be counted while stage 2 refuses, never the reverse.
 * Returns: all-allowed flag, then per window: allowed, count, remaining, resetSeconds,
 * retryAfterSeconds; then the member when anything was counted.
 */
const SLIDING_WINDOW_LUA = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local mode = ARGV[1]
local suffix = ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Scores are whole microseconds (below 2^63): '%d' writes them exactly, with none of the
-- floating-point formatting '%.0f' costs; numbers are handed to redis.call as text for the same reason.
local function fmt(x) return string.format('%d', x) end
local n = #KEYS
local limits, wins, winMs, floors, counts, refused, stages = {}, {}, {}, {}, {}, {}, {}
local all = true
local stageRefused = {}
for i = 1, n do
  limits[i] = tonumber(ARGV[3 * i])
  winMs[i] = tonumber(ARGV[1 + 3 * i])
  stages[i] = tonumber(ARGV[2 + 3 * i])
  wins[i] = winMs[i] * 1000
  floors[i] = now - wins[i]
  if mode == 'hit' then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', fmt(floors[i]))
    counts[i] = redis.call('ZCARD', KEYS[i])
  else
    counts[i] = redis.call('ZCOUNT', KEYS[i], '(' .. fmt(floors[i]), '+inf')
  end
  refused[i] = counts[i] >= limits[i]
  if refused[i] then
    all = false
    stageRefused[stages[i]] = true
  end
end
local member = nil
if mode == 'hit' then
  -- the last stage counted: every stage up to it admits the event
  local upTo = 0
  while stages[n] ~= nil and upTo < stages[n] and not stageRefused[upTo + 1] do upTo = upTo + 1 end
  if upTo > 0 then
    local score = fmt(now)
    member = score .. '-' .. suffix
    for i = 1, n do
      if stages[i] <= upTo then
        redis.call('ZADD', KEYS[i], score, member)
        redis.call('PEXPIRE', KEYS[i], ARGV[1 + 3 * i])
        counts[i] = counts[i] + 1
      end
    end
  end
end
-- seconds (ceil, >= 1) until the in-window event at 0-based position idx (oldest first) leaves;
-- a hit has already removed every event outside the window, so there the position is the rank
local function leaves(i, idx)
  local r
  if mode == 'hit' then
    local at = fmt(idx)
    r = redis.call('ZRANGE', KEYS[i], at, at, 'WITHSCORES')
  else
    r = redis.call('ZRANGEBYSCORE', KEYS[i], '(' .. fmt(floors[i]), '+inf', 'WITHSCORES', 'LIMIT', fmt(idx), '1')
  end
  if r[2] == nil then return math.max(1, math.ceil(wins[i] / 1000000)) end
  return math.max(1, math.ceil((tonumber(r[2]) + wins[i] - now) / 1000000))
end
local out = { all and 1 or 0 }
for i = 1, n do
  local remaining, reset, retry = 0, 0, 0
  if counts[i] > 0 then reset = leaves(i, 0) end
  if refused[i] then
    local idx = counts[i] - limits[i]
    if idx >= counts[i] then
      retry = math.max(1, math.ceil(wins[i] / 1000000))
    else
      retry = leaves(i, idx)
    end
  else
    remaining = math.max(0, limits[i] - counts[i])
  end
  out[#out + 1] = refused[i] and 0 or 1
  out[#out + 1] = counts[i]
  out[#out + 1] = remaining
  out[#out + 1] = reset
  out[#out + 1] = retry
end
if member then out[#out + 1] = member end
return out
`;

const COMMAND = 'fleetSlidingWindow';

type ScriptingRedis = Redis & {
  [COMMAND](numKeys: number, ...args: (string | number)[]): Promise<unknown>;
};

function checkSpecs(windows: WindowSpec[]): void {
  if (windows.length === 0) throw new RangeError('at least one window is required');
  const seen = new Set<string>();
  for (const w of windows) {
    if (typeof w.key !== 'string' || w.key.length === 0) throw new RangeError('window key must be a non-empty string');
    if (!Number.isInteger(w.limit) || w.limit < 0) throw new RangeError(`window ${w.key}: limit must be an integer >= 0`);
    if (!Number.isInteger(w.windowMs) || w.windowMs < 1) throw new RangeError(`window ${w.key}: windowMs must be an integer >= 1`);
    if (seen.has(w.key)) throw new RangeError(`window ${w.key} given twice`);
    seen.add(w.key);
  }
}

/**
 * Sliding-window-log rate limiter on Redis: one sorted set per window key, one Lua script per call,
 * Redis TIME as the clock. All windows of one call are checked and counted atomically.
 * With Redis Cluster every key of one call must hash to the same slot (put a {hash tag} in keyPrefix).
 */
export class SlidingWindowLimiter {
  private readonly redis: ScriptingRedis;
  private readonly instanceId = randomBytes(6).toString('hex');
  private seq = 0;

  constructor(redis: Redis, private readonly keyPrefix: string) {
    redis.defineCommand(COMMAND, { lua: SLIDING_WINDOW_LUA });
    this.redis = redis as ScriptingRedis;
  }

  /** Counts one event in every window atomically if all of them admit it; counts nothing if any refuses. */
  hit(windows: WindowSpec[]): Promise<HitResult> {
    return this.run('hit', [windows]).then((stages) => stages[0] as HitResult);
  }

  /**
   * One round trip for several stages of windows (e.g. the partner's request window, then the
   * route's limit classes): a stage is counted, all or nothing, when it and every earlier stage
   * admit the event; later stages are then not counted. One result per stage, in order; the
   * receipt (shared by every counted stage) refunds any of them.
   */
  hitStages(stages: WindowSpec[][]): Promise<HitResult[]> {
    return this.run('hit', stages);
  }

  /**
   * Takes back an event counted by hit() (its receipt), e.g. when the operation it paid for
   * was refused by the owning service and so never happened.
   */
  async refund(windows: WindowSpec[], receipt: string): Promise<void> {
    await this.redis.multi(windows.map((w) => ['zrem', this.keyPrefix + w.key, receipt])).exec();
  }

  /** Current state without counting (for headers on replays or refused requests). */
  peek(windows: WindowSpec[]): Promise<HitResult> {
    return this.run('peek', [windows]).then((stages) => stages[0] as HitResult);
  }

  private async run(mode: 'hit' | 'peek', stages: WindowSpec[][]): Promise<HitResult[]> {
    const windows = stages.flat();
    checkSpecs(windows);
    if (stages.some((stage) => stage.length === 0)) throw new RangeError('every stage needs a window');
    this.seq = (this.seq + 1) % Number.MAX_SAFE_INTEGER;
    const args: (string | number)[] = [mode, `${this.instanceId}.${this.seq.toString(36)}`];
    stages.forEach((stage, i) => {
      for (const w of stage) args.push(w.limit, w.windowMs, i + 1);
    });
    const keys = windows.map((w) => this.keyPrefix + w.key);
    const reply = await this.redis[COMMAND](keys.length, ...keys, ...args);
    const counted = Array.isArray(reply) && reply.length === 2 + 5 * windows.length;
    if (!Array.isArray(reply) || (!counted && reply.length !== 1 + 5 * windows.length)) {
      throw new Error('unexpected reply from the rate-limit script');
    }
    const num = (i: number): number => Number(reply[i]);
    const states = windows.map((w, i): WindowState => {
      const base = 1 + 5 * i;
      return {
        key: w.key,
        limit: w.limit,
        allowed: num(base) === 1,
        remaining: num(base + 2),
        resetSeconds: num(base + 3),
        retryAfterSeconds: num(base + 4),
      };
    });
    const receipt = counted ? String(reply[reply.length - 1]) : undefined;
    let offset = 0;
    let earlierAdmitted = true;
    return stages.map((stage) => {
      const own = states.slice(offset, offset + stage.length);
      offset += stage.length;
      const allowed = own.every((st) => st.allowed);
      // Counted only when every earlier stage admitted it too.
      const result = resultOf(allowed, own, allowed && earlierAdmitted ? receipt : undefined);
      earlierAdmitted &&= allowed;
      return result;
    });
  }
}

function resultOf(allowed: boolean, windows: WindowState[], receipt: string | undefined): HitResult {
  if (allowed) return receipt === undefined ? { allowed, windows } : { allowed, windows, receipt };
  let refusedBy: WindowState | undefined;
  for (const s of windows) {
    if (!s.allowed && (refusedBy === undefined || s.retryAfterSeconds > refusedBy.retryAfterSeconds)) refusedBy = s;
  }
  return refusedBy === undefined ? { allowed, windows } : { allowed, windows, refusedBy };
}

/** RateLimit-Limit / -Remaining / -Reset for one window, plus Retry-After when it refused. */
export function rateLimitHeaders(state: WindowState): Record<string, string> {
  const headers: Record<string, string> = {
    'RateLimit-Limit': String(state.limit),
    'RateLimit-Remaining': String(state.remaining),
    'RateLimit-Reset': String(state.resetSeconds),
  };
  if (!state.allowed) headers['Retry-After'] = String(state.retryAfterSeconds);
  return headers;
}
