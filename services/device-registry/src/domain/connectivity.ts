/**
 * Device connectivity (spec "Device connectivity"): the state machine the registry applies to
 * the bridge's connectivity batches, in pure form. The store applies exactly these rules in one
 * set-based statement; this module is the reference the tests hold both to.
 */
import { isDeviceId } from '@fleet/device-protocol';

export type ConnectivityStatus = 'connected' | 'disconnected';

export interface ConnectivityState {
  status: ConnectivityStatus;
  statusChangedAt: Date | null;
  lastSeenAt: Date | null;
}

export interface ConnectivityEvent {
  device_id: string;
  product: string;
  kind: 'seen' | 'offline';
  at: string;
}

/** One device's net effect of a batch: its latest `seen` and its latest `offline`. */
export interface DeviceBatchEffect {
  deviceId: string;
  seenAt: Date | null;
  offlineAt: Date | null;
}

/** The later of two moments, either of which may be missing. */
export const later = (a: Date | null, b: Date | null): Date | null => (a === null ? b : b === null ? a : a >= b ? a : b);

/** Parses and checks a batch payload; malformed events are dropped (returned in `rejected`). */
export function parseBatch(payload: unknown): { events: ConnectivityEvent[]; rejected: number } {
  const list = (payload as { events?: unknown } | null)?.events;
  if (!Array.isArray(list)) return { events: [], rejected: 1 };
  const events: ConnectivityEvent[] = [];
  let rejected = 0;
  for (const e of list as unknown[]) {
    const ev = e as Partial<ConnectivityEvent> | null;
    const ok =
      ev !== null &&
      typeof ev === 'object' &&
      typeof ev.device_id === 'string' &&
      isDeviceId(ev.device_id) &&
      (ev.kind === 'seen' || ev.kind === 'offline') &&
      typeof ev.at === 'string' &&
      !Number.isNaN(Date.parse(ev.at));
    if (ok) events.push(ev as ConnectivityEvent);
    else rejected++;
  }
  return { events, rejected };
}

/** Reduces a batch to one effect per device (order of events does not matter for the result). */
export function summarizeBatch(events: readonly ConnectivityEvent[]): DeviceBatchEffect[] {
  const byDevice = new Map<string, DeviceBatchEffect>();
  for (const e of events) {
    const effect = byDevice.get(e.device_id) ?? { deviceId: e.device_id, seenAt: null, offlineAt: null };
    const at = new Date(e.at);
    if (e.kind === 'seen') effect.seenAt = later(effect.seenAt, at);
    else effect.offlineAt = later(effect.offlineAt, at);
    byDevice.set(e.device_id, effect);
  }
  return [...byDevice.values()].sort((a, b) => (a.deviceId < b.deviceId ? -1 : a.deviceId > b.deviceId ? 1 : 0));
}

/**
 * What of a batch effect can concern the device record created at `createdAt`: reports from
 * before the record existed are of an earlier device that held the id (removed since, perhaps
 * provisioned again at once) and are dropped, so a new record starts disconnected with null
 * timestamps until the device itself sends something. The same rule for the overlay of heard
 * batches (handlers/recent-connectivity.ts), the stored apply (store/connectivity.ts) and
 * telemetry (store/telemetry.ts). Returns `effect` itself when nothing predates the record.
 */
export function effectSince<T extends Pick<DeviceBatchEffect, 'seenAt' | 'offlineAt'>>(effect: T, createdAt: Date): T {
  const seenAt = effect.seenAt && effect.seenAt >= createdAt ? effect.seenAt : null;
  const offlineAt = effect.offlineAt && effect.offlineAt >= createdAt ? effect.offlineAt : null;
  return seenAt === effect.seenAt && offlineAt === effect.offlineAt ? effect : { ...effect, seenAt, offlineAt };
}

/**
 * Applies one device's batch effect:
 * - seen at t: last_seen_at = max(last_seen_at, t); a device not connected becomes connected with
 *   status_changed_at = t (unless t predates its disconnection: a stale, redelivered report);
 * - offline at t: a connected device becomes disconnected with status_changed_at = t, unless the
 *   device was seen later than t (it came back).
 */
export function applyEffect(state: ConnectivityState, effect: Pick<DeviceBatchEffect, 'seenAt' | 'offlineAt'>): ConnectivityState {
  let { status, statusChangedAt } = state;
  const lastSeenAt = later(state.lastSeenAt, effect.seenAt);
  if (effect.seenAt && status !== 'connected' && (statusChangedAt === null || effect.seenAt >= statusChangedAt)) {
    status = 'connected';
    statusChangedAt = effect.seenAt;
  }
  if (effect.offlineAt && status === 'connected' && !(lastSeenAt !== null && lastSeenAt > effect.offlineAt)) {
    status = 'disconnected';
    statusChangedAt = effect.offlineAt;
  }
  return { status, statusChangedAt, lastSeenAt };
}

/**
 * The silence rule: a connected device with no report for `silenceMs` is disconnected. Its
 * status_changed_at is the moment the silence began to count (last_seen_at + silence), so a
 * backlog of reports that arrives later still reconnects it.
 */
export function applySilence(state: ConnectivityState, now: Date, silenceMs: number): ConnectivityState {
  if (state.status !== 'connected') return state;
  if (state.lastSeenAt !== null && now.getTime() - state.lastSeenAt.getTime() < silenceMs) return state;
  const since = state.lastSeenAt ? new Date(state.lastSeenAt.getTime() + silenceMs) : now;
  return { ...state, status: 'disconnected', statusChangedAt: since };
}
