import type { NatsConnection } from 'nats';
import { RecentConnectivity } from '../src/handlers/recent-connectivity';
import { logger } from './support';

/** The overlay alone (fed by take(); the subscription is covered in registry.integration.test.ts). */
describe('RecentConnectivity', () => {
  const recent = () => new RecentConnectivity(undefined as unknown as NatsConnection, 'unused', logger);
  const t = (s: number) => new Date(Date.UTC(2026, 0, 1, 12, 0, s));
  const stored = (status: string, statusChangedAt: Date | null, lastSeenAt: Date | null, createdAt = t(0)) => ({ deviceId: 'AABBCCDDEEFF', status, statusChangedAt, lastSeenAt, createdAt, name: 'kept' });
  const batch = (kind: 'seen' | 'offline', at: Date) => ({ events: [{ device_id: 'AABBCCDDEEFF', product: 'meter', kind, at: at.toISOString() }] });

  it('lays a heard seen over a disconnected device, keeping the other fields', () => {
    const r = recent();
    r.take(batch('seen', t(10)));
    expect(r.overlay(stored('disconnected', t(5), t(4)))).toEqual({ ...stored('connected', t(10), t(10)) });
  });

  it('does not reconnect on a seen older than the stored disconnection, and leaves unheard devices as stored', () => {
    const r = recent();
    r.take(batch('seen', t(3)));
    expect(r.overlay(stored('disconnected', t(5), t(4)))).toEqual(stored('disconnected', t(5), t(4)));
    const other = { ...stored('disconnected', null, null), deviceId: '001122334455' };
    expect(r.overlay(other)).toBe(other);
  });

  it('keeps the latest of several batches, so an offline after the seen wins', () => {
    const r = recent();
    r.take(batch('seen', t(10)));
    r.take(batch('offline', t(12)));
    r.take(batch('seen', t(11)));
    expect(r.overlay(stored('disconnected', null, null))).toMatchObject({ status: 'disconnected', statusChangedAt: t(12), lastSeenAt: t(11) });
  });

  it('lays nothing heard before the record was created over it: a device removed and provisioned again starts disconnected', () => {
    const r = recent();
    // The removed device was connected and sent until its removal (t(20)); the id is provisioned again at t(23).
    r.take(batch('seen', t(10)));
    r.take(batch('seen', t(19)));
    r.take(batch('offline', t(20)));
    const fresh = stored('disconnected', null, null, t(23));
    expect(r.overlay(fresh)).toBe(fresh);
    // The same held batches still count for a record older than them (the removed one, or another replica's read).
    expect(r.overlay(stored('disconnected', null, null, t(0)))).toMatchObject({ status: 'disconnected', statusChangedAt: t(20), lastSeenAt: t(19) });
    // The new device's own first message connects it, dated by itself alone.
    r.take(batch('seen', t(30)));
    expect(r.overlay(fresh)).toEqual(stored('connected', t(30), t(30), t(23)));
  });

  it('whenConnected does not take a report of the id from before the record was created', async () => {
    const r = recent();
    const created = new Date();
    const asked = r.whenConnected(stored('disconnected', null, null, created), 300);
    setTimeout(() => r.take(batch('seen', new Date(created.getTime() - 5000))), 20);
    expect(await asked).toMatchObject({ status: 'disconnected', statusChangedAt: null, lastSeenAt: null });
  });

  it('whenConnected answers as soon as a seen is heard, or as stored after the wait', async () => {
    const r = recent();
    const started = Date.now();
    expect(await r.whenConnected(stored('disconnected', null, null), 100)).toMatchObject({ status: 'disconnected' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(95);
    const asked = r.whenConnected(stored('disconnected', null, null), 5000);
    setTimeout(() => r.take(batch('seen', new Date())), 20);
    expect(await asked).toMatchObject({ status: 'connected' });
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
