import { principal, testSubject } from '@fleet/test-kit';
import { accountBody } from '../src/handlers/account';
import { bearerToken, Authenticator } from '../src/auth/authenticator';
import { generateApiKey, hashSecret, parseApiKey, secretMatches } from '../src/domain/api-key';
import { parseChannels, parsePermissions, permissionMap } from '../src/domain/partner-settings';
import { readGatewayConfig } from '../src/config';
import { RouteMatcher } from '../src/http/route-matcher';
import type { RouteDef } from '../src/routes/types';
import type { KeyWithPartner } from '../src/store/partners';

const route = (method: RouteDef['method'], path: string): RouteDef => ({
  method, path, operationId: `${method}${path}`, tag: 't', summary: 's', permission: null, target: { subject: testSubject('x') }, responses: {},
});

describe('RouteMatcher', () => {
  const matcher = new RouteMatcher([route('GET', '/v1/devices'), route('GET', '/v1/devices/{device_id}'), route('DELETE', '/v1/devices/{device_id}'), route('GET', '/v1/devices/{device_id}/state')]);

  it('matches parameters and decodes them', () => {
    expect(matcher.match('GET', '/v1/devices/AB%43')).toMatchObject({ kind: 'found', match: { params: { device_id: 'ABC' } } });
    expect(matcher.match('GET', '/v1/devices/')).toMatchObject({ kind: 'found', match: { route: { path: '/v1/devices' } } });
    expect(matcher.match('HEAD', '/v1/devices/X/state')).toMatchObject({ kind: 'found' });
  });

  it('tells a wrong method from an unknown path', () => {
    expect(matcher.match('POST', '/v1/devices/X')).toEqual({ kind: 'wrong_method', allow: ['DELETE', 'GET', 'HEAD'] });
    expect(matcher.match('GET', '/v1/devices/X/nope')).toEqual({ kind: 'none' });
    expect(matcher.match('GET', '/v1/devices/%E0%A4%A')).toEqual({ kind: 'none' });
  });

  it("matches a request once, by its path without the query string, and keeps that request's match", () => {
    const req = { method: 'GET', path: '/v1/devices/X/state', url: '/v1/devices/X/state?x=1' } as unknown as Parameters<RouteMatcher['matchRequest']>[0];
    const spy = jest.spyOn(matcher, 'match');
    const first = matcher.matchRequest(req);
    expect(first).toMatchObject({ kind: 'found', match: { route: { path: '/v1/devices/{device_id}/state' }, params: { device_id: 'X' } } });
    expect(matcher.matchRequest(req)).toBe(first);
    expect(spy).toHaveBeenCalledTimes(1);
    const other = { method: 'DELETE', path: '/v1/devices/X' } as unknown as Parameters<RouteMatcher['matchRequest']>[0];
    expect(matcher.matchRequest(other)).toMatchObject({ kind: 'found', match: { route: { method: 'DELETE' } } });
    spy.mockRestore();
  });

  it('refuses a table with the same method and path twice', () => {
    expect(() => new RouteMatcher([route('GET', '/a'), route('GET', '/a')])).toThrow(/duplicate/);
  });
});

describe('API keys', () => {
  it('issues keys whose public part parses back and whose secret matches only its hash', () => {
    const issued = generateApiKey();
    const parsed = parseApiKey(issued.key);
    expect(parsed?.keyPrefix).toBe(issued.keyPrefix);
    expect(secretMatches(parsed!.secret, issued.secretHash)).toBe(true);
    expect(secretMatches(`${parsed!.secret}x`, issued.secretHash)).toBe(false);
    expect(issued.secretHash).toBe(hashSecret(parsed!.secret));
    // Stored hashes are SHA-256 in lowercase hex: keys issued before keep matching.
    expect(hashSecret('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(issued.secretHash).not.toContain(parsed!.secret);
    expect(generateApiKey().key).not.toBe(issued.key);
  });

  it('rejects malformed keys', () => {
    for (const bad of ['', 'pdk', 'pdk_abc', 'pdk_abcdefgh_short', 'PDK_abcdefghijk_' + 'a'.repeat(32), 'pdk_abc def_' + 'a'.repeat(32)]) {
      expect(parseApiKey(bad)).toBeNull();
    }
  });

  it('reads the bearer token, telling a missing header from an unusable one', () => {
    expect(bearerToken(undefined)).toBeUndefined();
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer  abc ')).toBe('abc');
    expect(bearerToken('Basic abc')).toBe('');
    expect(bearerToken('Bearer')).toBe('');
  });
});

describe('partner settings', () => {
  it('parses permission and channel lists strictly', () => {
    expect(parsePermissions('energy_read, state_read')).toEqual(['state_read', 'energy_read']);
    expect(parsePermissions('all')).toHaveLength(21);
    expect(parsePermissions('all')).toEqual(expect.arrayContaining(['events_read', 'webhook_manage']));
    expect(parsePermissions('all')).not.toEqual(expect.arrayContaining(['access_all_devices']));
    expect(parsePermissions('all')).not.toContain('raw_mqtt_devices');
    expect(parsePermissions('all')).not.toContain('raw_mqtt_global');
    expect(parsePermissions('all,raw_mqtt_devices')).toHaveLength(22);
    expect(parsePermissions('webhook_manage,events_read')).toEqual(['events_read', 'webhook_manage']);
    expect(parsePermissions('state_read,all')).toEqual(parsePermissions('all'));
    expect(() => parsePermissions('state_read,admin')).toThrow(/admin/);
    expect(parseChannels('sound,light1')).toEqual(['light1', 'sound']);
    expect(() => parseChannels('light4')).toThrow(/light4/);
    expect(Object.values(permissionMap(['state_read'])).filter(Boolean)).toHaveLength(1);
  });

  it('shows the push event permissions in the account like every other', () => {
    const partner = accountBody(principal({ permissions: ['events_read', 'state_read'] })).partner as { permissions: Record<string, boolean> };
    expect(partner.permissions).toMatchObject({ events_read: true, webhook_manage: false, state_read: true, health_read: false });
    expect(Object.keys(partner.permissions).slice(-2)).toEqual(['events_read', 'webhook_manage']);
  });
});

describe('Authenticator cache', () => {
  const issued = generateApiKey();
  const entry = (overrides: Partial<KeyWithPartner['partner']> = {}, revokedAt: Date | null = null): KeyWithPartner => ({
    keyPrefix: issued.keyPrefix,
    secretHash: issued.secretHash,
    revokedAt,
    partner: { id: 'p', name: 'n', permissions: [], orgGrants: [], allowedChannels: [], requestsPerMin: 1, deviceCommandsPerMin: 1, disabledAt: null, ...overrides },
  });

  it('serves from cache while caching is safe and sees changes once told', async () => {
    let current = entry();
    const lookup = jest.fn(async () => current);
    const auth = new Authenticator(lookup, () => true);
    expect(await auth.authenticate(issued.key)).not.toBeNull();
    current = entry({}, new Date());
    expect(await auth.authenticate(issued.key)).not.toBeNull();
    expect(lookup).toHaveBeenCalledTimes(1);
    auth.forgetAll();
    expect(await auth.authenticate(issued.key)).toBeNull();
  });

  it('reads the store every time while the change listener is down', async () => {
    let current = entry();
    const lookup = jest.fn(async () => current);
    const auth = new Authenticator(lookup, () => false);
    await auth.authenticate(issued.key);
    current = entry({ disabledAt: new Date() });
    expect(await auth.authenticate(issued.key)).toBeNull();
    expect(lookup).toHaveBeenCalledTimes(2);
  });

  it('does not cache a lookup that raced a change', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let current = entry();
    const lookup = jest.fn(async () => {
      const seen = current;
      await gate;
      return seen;
    });
    const auth = new Authenticator(lookup, () => true);
    const pending = auth.authenticate(issued.key);
    current = entry({}, new Date());
    auth.forgetAll();
    release();
    expect(await pending).not.toBeNull();
    expect(await auth.authenticate(issued.key)).toBeNull();
  });
});

describe('V8 settings', () => {
  it("grows the heap for relayed pages by default and leaves the young trigger at V8's own (0), both settable", () => {
    expect(readGatewayConfig({})).toMatchObject({ GATEWAY_HEAP_GROWING_PERCENT: 200, GATEWAY_MINOR_GC_TRIGGER_PERCENT: 0 });
    expect(readGatewayConfig({ GATEWAY_HEAP_GROWING_PERCENT: '0', GATEWAY_MINOR_GC_TRIGGER_PERCENT: '5' })).toMatchObject({ GATEWAY_HEAP_GROWING_PERCENT: 0, GATEWAY_MINOR_GC_TRIGGER_PERCENT: 5 });
    expect(() => readGatewayConfig({ GATEWAY_MINOR_GC_TRIGGER_PERCENT: '101' })).toThrow();
  });
});
