import { Webhook } from 'standardwebhooks';
import { eventFor, mayReceive, receivableTypes, type PartnerAccess } from '../src/domain/audience';
import { addressAllowed, receiverUrlProblem } from '../src/domain/receiver-url';
import { parseRetrySchedule, retryDelay } from '../src/domain/retry-schedule';
import { openSecret, sealSecret } from '../src/domain/secret-box';
import { deliveryHeaders, newSigningSecret } from '../src/domain/signing';
import { sseEvent } from '../src/domain/sse';
import { deliveryCursor, parseDeliveryCursor } from '../src/domain/views';
import type { Permission } from '@fleet/contracts';

const access = (permissions: Permission[], orgGrants: number[] = []): PartnerAccess => ({ partnerId: 'p', permissions: new Set(permissions), orgGrants });

describe('retry schedule', () => {
  it('parses delays and ends after the last one', () => {
    const schedule = parseRetrySchedule('5s, 5m,2h,1d,250ms');
    expect(schedule).toEqual([5_000, 300_000, 7_200_000, 86_400_000, 250]);
    expect(retryDelay(schedule, 1)).toBe(5_000);
    expect(retryDelay(schedule, 5)).toBe(250);
    expect(retryDelay(schedule, 6)).toBeNull();
  });

  it('the default gives 11 attempts within 3 days', () => {
    const schedule = parseRetrySchedule('5s,5m,30m,2h,5h,10h,10h,10h,10h,14h');
    expect(schedule).toHaveLength(10);
    expect(schedule.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(3 * 86_400_000);
  });

  it('refuses what is not a delay', () => {
    expect(() => parseRetrySchedule('5 seconds')).toThrow(/not a delay/);
    expect(() => parseRetrySchedule('')).toThrow(/at least one/);
  });
});

describe('who may receive an event', () => {
  const path = [1, 4, 9];
  it('needs the type’s permission', () => {
    expect(mayReceive(access([], [1]), 'device.connected', [path])).toBe(false);
    expect(mayReceive(access(['health_read'], [1]), 'device.connected', [path])).toBe(true);
    expect(mayReceive(access([], [1]), 'device.provisioned', [path])).toBe(true);
    expect(mayReceive(access(['energy_read'], [1]), 'meter.energy_reset_settled', [path])).toBe(false);
    expect(mayReceive(access(['energy_reset'], [1]), 'meter.energy_reset_settled', [path])).toBe(true);
  });

  it('needs the device’s node inside a granted subtree, or access to every device', () => {
    expect(mayReceive(access(['health_read'], [4]), 'device.connected', [path])).toBe(true);
    expect(mayReceive(access(['health_read'], [5]), 'device.connected', [path])).toBe(false);
    expect(mayReceive(access(['health_read', 'access_all_devices']), 'device.connected', [path])).toBe(true);
    // A device the registry no longer knows reaches nobody.
    expect(mayReceive(access(['access_all_devices']), 'device.provisioned', [])).toBe(false);
  });

  it('a move reaches partners of either node', () => {
    expect(mayReceive(access([], [7]), 'device.moved', [[1, 4], [1, 7]])).toBe(true);
    expect(mayReceive(access([], [8]), 'device.moved', [[1, 4], [1, 7]])).toBe(false);
  });

  it('a move names only the nodes the partner can see: a node outside its scope is null', () => {
    const moved = { id: 'evt_1', type: 'device.moved', data: { from_org_node_id: 4, to_org_node_id: 7 } };
    const places = [[1, 4], [1, 7]];
    expect(eventFor(access([], [7]), moved, places).data).toEqual({ from_org_node_id: null, to_org_node_id: 7 });
    expect(eventFor(access([], [4]), moved, places).data).toEqual({ from_org_node_id: 4, to_org_node_id: null });
    expect(eventFor(access([], [1]), moved, places)).toBe(moved);
    expect(eventFor(access(['access_all_devices']), moved, places)).toBe(moved);
    // Other events are as the producer wrote them.
    const provisioned = { id: 'evt_2', type: 'device.provisioned', data: { product: 'light', name: null, org_node_id: 4 } };
    expect(eventFor(access([], [4]), provisioned, [[1, 4]])).toBe(provisioned);
  });

  it('an unknown type reaches nobody; receivable types follow permissions', () => {
    expect(mayReceive(access(['access_all_devices']), 'device.exploded', [path])).toBe(false);
    expect(receivableTypes(access(['system_read']), ['system.log_received', 'alert.level_changed', 'device.removed'])).toEqual(['system.log_received', 'device.removed']);
  });
});

describe('receiver URLs (SSRF guard)', () => {
  const production = { local: false };
  const local = { local: true };
  it('wants https without credentials in production, allows http locally', () => {
    expect(receiverUrlProblem('https://hooks.example.com/in', production)).toBeUndefined();
    expect(receiverUrlProblem('http://hooks.example.com/in', production)).toMatch(/https/);
    expect(receiverUrlProblem('http://127.0.0.1:9000/in', local)).toBeUndefined();
    expect(receiverUrlProblem('https://user:pw@hooks.example.com/', production)).toMatch(/credentials/);
    expect(receiverUrlProblem('ftp://hooks.example.com/', local)).toMatch(/http/);
    expect(receiverUrlProblem('not a url', production)).toMatch(/absolute/);
  });

  it.each([['127.0.0.1'], ['10.1.2.3'], ['172.16.0.1'], ['192.168.1.1'], ['::1'], ['fd00::1'], ['::ffff:10.0.0.1'], ['::ffff:127.0.0.1']])(
    'refuses the loopback or private %s in production, allows it in the local fleet',
    (address) => {
      expect(addressAllowed(address, production)).toBe(false);
      expect(addressAllowed(address, local)).toBe(true);
    },
  );

  it.each([
    ['169.254.169.254'],
    ['169.254.0.1'],
    ['0.0.0.0'],
    ['::'],
    ['fe80::1'],
    ['febf::1'],
    ['::ffff:169.254.169.254'],
    ['::ffff:0.0.0.0'],
    ['64:ff9b::a9fe:a9fe'],
    ['100.64.0.1'],
    ['224.0.0.1'],
    ['255.255.255.255'],
    ['ff02::1'],
  ])('refuses the link-local, unspecified or otherwise special %s everywhere, the local fleet included', (address) => {
    expect(addressAllowed(address, production)).toBe(false);
    expect(addressAllowed(address, local)).toBe(false);
  });

  it.each([['::a9fe:a9fe'], ['::169.254.169.254'], ['0:0:0:0:0:0:169.254.169.254'], ['::127.0.0.1'], ['::7f00:1'], ['::a00:1'], ['::5db8:d822'], ['::93.184.216.34']])(
    'refuses the IPv4-compatible %s (::/96) everywhere, whatever IPv4 address it carries',
    (address) => {
      expect(addressAllowed(address, production)).toBe(false);
      expect(addressAllowed(address, local)).toBe(false);
    },
  );

  it('allows public unicast addresses', () => {
    expect(addressAllowed('93.184.216.34', production)).toBe(true);
    expect(addressAllowed('2606:2800:220:1:248:1893:25c8:1946', production)).toBe(true);
    expect(addressAllowed('::ffff:93.184.216.34', production)).toBe(true);
    expect(addressAllowed('not-an-address', local)).toBe(false);
  });
});

describe('signing (Standard Webhooks)', () => {
  it('signs so that the standardwebhooks library verifies, with either secret during a rotation', () => {
    const current = newSigningSecret();
    const previous = newSigningSecret();
    expect(current).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    const body = JSON.stringify({ id: 'evt_1', type: 'device.connected' });
    const headers = deliveryHeaders([current, previous], 'evt_1', new Date(), body);
    expect(headers['webhook-signature']?.split(' ')).toHaveLength(2);
    expect(new Webhook(current).verify(body, headers)).toEqual(JSON.parse(body));
    expect(new Webhook(previous).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(newSigningSecret()).verify(body, headers)).toThrow();
    expect(() => new Webhook(current).verify(`${body} `, headers)).toThrow();
  });
});

describe('secrets at rest', () => {
  const key = Buffer.alloc(32, 7);
  it('opens what it sealed, only for the same endpoint and key', () => {
    const sealed = sealSecret(key, 'wh_a', 'whsec_abc');
    expect(sealed).not.toContain('whsec_abc');
    expect(openSecret(key, 'wh_a', sealed)).toBe('whsec_abc');
    expect(() => openSecret(key, 'wh_b', sealed)).toThrow();
    expect(() => openSecret(Buffer.alloc(32, 8), 'wh_a', sealed)).toThrow();
  });
});

describe('server-sent events and cursors', () => {
  it('frames an event with its stream position as id', () => {
    expect(sseEvent(42, 'device.connected', '{"a":1}')).toBe('id: 42\nevent: device.connected\ndata: {"a":1}\n\n');
  });

  it('round-trips the deliveries cursor of its endpoint and refuses others', () => {
    const a = 'wh_' + 'a'.repeat(32);
    const b = 'wh_' + 'b'.repeat(32);
    expect(parseDeliveryCursor(deliveryCursor(a, 123n), a)).toBe(123n);
    expect(parseDeliveryCursor(deliveryCursor(a, 123n), b)).toBeUndefined();
    expect(parseDeliveryCursor(Buffer.from('d:123').toString('base64url'), a)).toBeUndefined();
    expect(parseDeliveryCursor('garbage', a)).toBeUndefined();
  });
});
