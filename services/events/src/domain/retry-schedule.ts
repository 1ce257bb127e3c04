/**
 * When a failed delivery is tried again. The schedule is the list of delays after each failed
 * attempt; once they are used up, the delivery is dead (the partner may still redeliver it).
 * The default (5 s, 5 min, 30 min, 2 h, 5 h, 10 h ×4, 14 h: 11 attempts over about 2.6 days)
 * follows the shape Standard Webhooks senders use: quick retries for a blip, hours for an outage.
 */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "5s,5m,2h" → delays in ms. */
export function parseRetrySchedule(text: string): number[] {
  const delays = text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(part);
      if (!match) throw new Error(`'${part}' is not a delay like 5s, 5m, 2h`);
      return Math.round(Number(match[1]) * (UNIT_MS[match[2] as string] as number));
    });
  if (delays.length === 0) throw new Error('the retry schedule needs at least one delay');
  return delays;
}

/** The delay before the next attempt after `attemptsMade` attempts failed, or null: that was the last. */
export function retryDelay(schedule: readonly number[], attemptsMade: number): number | null {
  return attemptsMade >= 1 && attemptsMade <= schedule.length ? (schedule[attemptsMade - 1] as number) : null;
}
