export { SlidingWindowLimiter, rateLimitHeaders } from './sliding-window';
export type { WindowSpec, WindowState, HitResult } from './sliding-window';
export { DEFAULT_LIMIT_SETTINGS, LIMIT_CLASSES, requestWindowFor, windowsFor } from './classes';
export type { LimitClass, LimitSettings } from './classes';
