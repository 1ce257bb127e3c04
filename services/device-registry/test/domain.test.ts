import { ApiError } from '@fleet/service-kit';
import { applyEffect, applySilence, effectSince, parseBatch, summarizeBatch, type ConnectivityState } from '../src/domain/connectivity';
import { deviceView } from '../src/domain/device-view';
import { parseProvisionBody, placeDevice } from '../src/domain/provision';
import { nodeInScope, orgForest, resolveMoveTarget, scopeOf, type OrgNodeRow } from '../src/domain/scope';

const ID = '0123456789AB';

function refusal(fn: () => unknown): { status: number; code: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, code: err.code, message: err.message };
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('provision body rules', () => {
  it('defaults to generate and light', () => {
    expect(parseProvisionBody(ID, { credential_format: 'derived-v1' })).toEqual({ deviceId: ID, product: 'light', source: 'generate' });
  });

  it('requires credential_format derived-v1', () => {
    expect(refusal(() => parseProvisionBody(ID, {}))).toEqual({ status: 400, code: 'validation_error', message: "missing required field 'credential_format'" });
    expect(refusal(() => parseProvisionBody(ID, { credential_format: 'derived-v2' })).message).toBe("invalid 'credential_format': must be 'derived-v1'");
  });

  it('checks the device id format', () => {
    for (const bad of ['0123456789ab', '0123456789A', '0123456789ABC', '01-23-45-67-89']) {
      expect(refusal(() => parseProvisionBody(bad, { credential_format: 'derived-v1' })).code).toBe('validation_error');
    }
  });

  it('allows only the field matching the credential source', () => {
    const base = { credential_format: 'derived-v1' };
    expect(refusal(() => parseProvisionBody(ID, { ...base, root_secret: 'Rt0!secret#Key42' })).message).toBe(
      "field 'root_secret' is not allowed with credential_source 'generate'",
    );
    expect(refusal(() => parseProvisionBody(ID, { ...base, credential_source: 'root_secret', root_secret: 'Rt0!secret#Key42', mqtt_password: 'a'.repeat(32) })).message).toBe(
      "field 'mqtt_password' is not allowed with credential_source 'root_secret'",
    );
    expect(refusal(() => parseProvisionBody(ID, { ...base, credential_source: 'mqtt_password', mqtt_password: 'a'.repeat(32), root_secret: 'Rt0!secret#Key42' })).message).toBe(
      "field 'root_secret' is not allowed with credential_source 'mqtt_password'",
    );
    expect(refusal(() => parseProvisionBody(ID, { ...base, credential_source: 'root_secret' })).message).toBe(
      "missing required field 'root_secret' for credential_source 'root_secret'",
    );
    expect(refusal(() => parseProvisionBody(ID, { ...base, credential_source: 'mqtt_password' })).message).toBe(
      "missing required field 'mqtt_password' for credential_source 'mqtt_password'",
    );
    expect(refusal(() => parseProvisionBody(ID, { ...base, credential_source: 'other' })).code).toBe('validation_error');
  });

  it('checks root_secret and mqtt_password formats', () => {
    const rs = (root_secret: string) => () => parseProvisionBody(ID, { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret });
    expect(rs('Rt0!secret#Key42')()).toMatchObject({ source: 'root_secret', rootSecret: 'Rt0!secret#Key42' });
    for (const bad of ['short', 'Rt0!secret Key42', 'Rt0!secret#Key42x', 'Rt0!secret#Key4\u00e9']) {
      expect(refusal(rs(bad)).message).toBe("invalid 'root_secret': must be 16 printable ASCII characters without whitespace");
    }
    const mp = (mqtt_password: string) => () => parseProvisionBody(ID, { credential_format: 'derived-v1', credential_source: 'mqtt_password', mqtt_password });
    expect(mp('0123456789abcdef0123456789abcdef')()).toMatchObject({ source: 'mqtt_password', mqttPassword: '0123456789abcdef0123456789abcdef' });
    for (const bad of ['0123456789ABCDEF0123456789ABCDEF', '0123456789abcdef', 'g'.repeat(32)]) {
      expect(refusal(mp(bad)).message).toBe("invalid 'mqtt_password': must be 32 lowercase hexadecimal characters");
    }
  });

  it('checks product, name, org and unknown fields', () => {
    const base = { credential_format: 'derived-v1' };
    expect(parseProvisionBody(ID, { ...base, product: 'meter', name: 'Kitchen', org: 'Acme' })).toMatchObject({ product: 'meter', name: 'Kitchen', org: 'Acme' });
    expect(refusal(() => parseProvisionBody(ID, { ...base, product: 'toaster' })).message).toBe("invalid 'product': must be 'light' or 'meter'");
    expect(refusal(() => parseProvisionBody(ID, { ...base, name: '' })).code).toBe('validation_error');
    expect(refusal(() => parseProvisionBody(ID, { ...base, name: 'x'.repeat(121) })).code).toBe('validation_error');
    expect(refusal(() => parseProvisionBody(ID, { ...base, colour: 'red' })).message).toBe("unknown field 'colour'");
  });
});

describe('org placement', () => {
  const nodes = [
    { id: 1, parentId: null, name: 'Staging / Inventory' },
    { id: 2, parentId: null, name: 'Acme' },
    { id: 3, parentId: 2, name: 'Berlin' },
    { id: 4, parentId: 2, name: 'Munich' },
    { id: 5, parentId: 4, name: 'Berlin' },
  ];
  const named = (name: string) => nodes.filter((n) => n.name === name);

  it('access-all: optional org naming a root, Staging when omitted', () => {
    expect(placeDevice(undefined, true, [])).toBe(1);
    expect(placeDevice('Acme', true, named('Acme'))).toBe(2);
    expect(refusal(() => placeDevice('Berlin', true, named('Berlin')))).toEqual({ status: 400, code: 'validation_error', message: "unknown organization 'Berlin'" });
    expect(refusal(() => placeDevice('Nowhere', true, []))).toMatchObject({ message: "unknown organization 'Nowhere'" });
    const twoRoots = [...nodes, { id: 6, parentId: null, name: 'Acme' }];
    expect(refusal(() => placeDevice('Acme', true, twoRoots.filter((n) => n.name === 'Acme')))).toMatchObject({
      status: 400,
      message: "organization 'Acme' is ambiguous: 2 organizations in your scope share that name",
    });
  });

  it('org-scoped: org required, unknown or out of scope look the same, ambiguity counts the in-scope nodes', () => {
    expect(refusal(() => placeDevice(undefined, false, [])).code).toBe('validation_error');
    expect(placeDevice('Munich', false, named('Munich'))).toBe(4);
    expect(refusal(() => placeDevice('Munich', false, []))).toMatchObject({ status: 400, message: "unknown organization 'Munich'" });
    expect(refusal(() => placeDevice('Berlin', false, named('Berlin')))).toMatchObject({
      status: 400,
      message: "organization 'Berlin' is ambiguous: 2 organizations in your scope share that name",
    });
  });
});

describe('scope', () => {
  const tree: OrgNodeRow[] = [
    { id: 1, parentId: null, name: 'Staging / Inventory' },
    { id: 2, parentId: null, name: 'Acme' },
    { id: 3, parentId: 2, name: 'North' },
    { id: 4, parentId: 3, name: 'Depot' },
    { id: 5, parentId: 2, name: 'South' },
    { id: 6, parentId: null, name: 'Other' },
  ];
  const principal = (permissions: string[], grants: number[]) => ({ permissions, org_grants: grants }) as never;

  it('a device is in scope in a granted subtree or with access_all_devices; Staging only with access-all or a Staging grant', () => {
    const scoped = scopeOf(principal([], [3]));
    expect([1, 2, 3, 4, 5, 6].filter((id) => nodeInScope(tree, scoped, id))).toEqual([3, 4]);
    const all = scopeOf(principal(['access_all_devices'], []));
    expect([1, 2, 3, 4, 5, 6].every((id) => nodeInScope(tree, all, id))).toBe(true);
    expect(nodeInScope(tree, all, 99)).toBe(false);
    expect(nodeInScope(tree, scopeOf(principal([], [1])), 1)).toBe(true);
    expect(nodeInScope(tree, scopeOf(principal([], [])), 1)).toBe(false);
  });

  it('the org tree is a forest of granted subtrees, the whole tree with access-all, empty without grants', () => {
    expect(orgForest(tree, scopeOf(principal([], [3, 6])))).toEqual([
      { id: 3, parent_id: null, name: 'North' },
      { id: 4, parent_id: 3, name: 'Depot' },
      { id: 6, parent_id: null, name: 'Other' },
    ]);
    // An overlapping grant does not cut its subtree loose from the outer one.
    expect(orgForest(tree, scopeOf(principal([], [2, 3]))).map((n) => [n.id, n.parent_id])).toEqual([
      [2, null],
      [3, 2],
      [4, 3],
      [5, 2],
    ]);
    expect(orgForest(tree, scopeOf(principal(['access_all_devices'], [])))).toHaveLength(6);
    expect(orgForest(tree, scopeOf(principal([], [])))).toEqual([]);
  });

  it('org move rules', () => {
    const scoped = scopeOf(principal([], [3]));
    expect(resolveMoveTarget(tree, scoped, 4)).toBe(4);
    expect(refusal(() => resolveMoveTarget(tree, scoped, 5))).toMatchObject({ status: 403, code: 'node_out_of_scope' });
    expect(refusal(() => resolveMoveTarget(tree, scoped, 999))).toMatchObject({ status: 403, code: 'node_out_of_scope' });
    expect(refusal(() => resolveMoveTarget(tree, scoped, null))).toMatchObject({ status: 409, code: 'would_lose_access' });
    expect(refusal(() => resolveMoveTarget(tree, scopeOf(principal([], [1])), null))).toMatchObject({ status: 409, code: 'would_lose_access' });
    const all = scopeOf(principal(['access_all_devices'], []));
    expect(resolveMoveTarget(tree, all, null)).toBe(1);
    expect(resolveMoveTarget(tree, all, 5)).toBe(5);
    expect(refusal(() => resolveMoveTarget(tree, all, 999))).toMatchObject({ code: 'node_out_of_scope' });
  });
});

describe('connectivity state machine', () => {
  const t = (s: number) => new Date(Date.UTC(2026, 10, 22, 10, 0, s));
  const disconnected: ConnectivityState = { status: 'disconnected', statusChangedAt: null, lastSeenAt: null };

  it('any device message connects and sets last_seen_at', () => {
    expect(applyEffect(disconnected, { seenAt: t(5), offlineAt: null })).toEqual({ status: 'connected', statusChangedAt: t(5), lastSeenAt: t(5) });
    const connected = { status: 'connected' as const, statusChangedAt: t(5), lastSeenAt: t(5) };
    // Already connected: only last_seen_at moves, and never backwards.
    expect(applyEffect(connected, { seenAt: t(9), offlineAt: null })).toEqual({ ...connected, lastSeenAt: t(9) });
    expect(applyEffect({ ...connected, lastSeenAt: t(9) }, { seenAt: t(7), offlineAt: null })).toEqual({ ...connected, lastSeenAt: t(9) });
  });

  it('the last will disconnects at its receive time unless the device was seen later', () => {
    const connected = { status: 'connected' as const, statusChangedAt: t(5), lastSeenAt: t(5) };
    expect(applyEffect(connected, { seenAt: null, offlineAt: t(10) })).toEqual({ status: 'disconnected', statusChangedAt: t(10), lastSeenAt: t(5) });
    expect(applyEffect({ ...connected, lastSeenAt: t(12) }, { seenAt: null, offlineAt: t(10) })).toEqual({ ...connected, lastSeenAt: t(12) });
    // seen then offline in one batch ends disconnected; offline then seen ends connected.
    expect(applyEffect(disconnected, { seenAt: t(3), offlineAt: t(4) })).toEqual({ status: 'disconnected', statusChangedAt: t(4), lastSeenAt: t(3) });
    expect(applyEffect(disconnected, { seenAt: t(4), offlineAt: t(3) })).toEqual({ status: 'connected', statusChangedAt: t(4), lastSeenAt: t(4) });
  });

  it('a stale report older than the disconnection does not reconnect', () => {
    const gone = { status: 'disconnected' as const, statusChangedAt: t(10), lastSeenAt: t(5) };
    expect(applyEffect(gone, { seenAt: t(8), offlineAt: null })).toEqual({ ...gone, lastSeenAt: t(8) });
  });

  it('silence disconnects a connected device after the window', () => {
    const connected = { status: 'connected' as const, statusChangedAt: t(0), lastSeenAt: t(0) };
    expect(applySilence(connected, new Date(t(0).getTime() + 1499_000), 1500_000)).toBe(connected);
    expect(applySilence(connected, new Date(t(0).getTime() + 1600_000), 1500_000)).toEqual({
      status: 'disconnected',
      statusChangedAt: new Date(t(0).getTime() + 1500_000),
      lastSeenAt: t(0),
    });
    expect(applySilence(disconnected, t(0), 1)).toBe(disconnected);
  });

  it('a record takes only reports from its own lifetime: earlier ones are of a removed device that had the id', () => {
    const created = t(10);
    const effect = { deviceId: ID, seenAt: t(4), offlineAt: t(6) };
    expect(effectSince(effect, created)).toEqual({ deviceId: ID, seenAt: null, offlineAt: null });
    // A device provisioned again right after its removal starts disconnected with null timestamps.
    expect(applyEffect(disconnected, effectSince(effect, created))).toEqual(disconnected);
    // Its own reports count, from the moment of creation on; one unchanged effect is returned as it is.
    expect(effectSince({ deviceId: ID, seenAt: t(12), offlineAt: t(6) }, created)).toEqual({ deviceId: ID, seenAt: t(12), offlineAt: null });
    const own = { deviceId: ID, seenAt: t(10), offlineAt: t(11) };
    expect(effectSince(own, created)).toBe(own);
  });

  it('reduces a batch to one effect per device and drops malformed events', () => {
    const { events, rejected } = parseBatch({
      events: [
        { device_id: ID, product: 'light', kind: 'seen', at: t(1).toISOString() },
        { device_id: ID, product: 'light', kind: 'offline', at: t(2).toISOString() },
        { device_id: 'BA9876543210', product: 'meter', kind: 'seen', at: t(3).toISOString() },
        { device_id: 'nope', kind: 'seen', at: 'x' },
      ],
    });
    expect(rejected).toBe(1);
    expect(summarizeBatch(events)).toEqual([
      { deviceId: ID, seenAt: t(1), offlineAt: t(2) },
      { deviceId: 'BA9876543210', seenAt: t(3), offlineAt: null },
    ]);
    expect(parseBatch({}).rejected).toBe(1);
  });
});

describe('device view', () => {
  const light = {
    deviceId: ID,
    product: 'light',
    name: null,
    orgNodeId: 2,
    automationEnabled: true,
    status: 'connected',
    statusChangedAt: new Date('2026-11-22T10:00:00.000Z'),
    lastSeenAt: new Date('2026-11-22T10:05:00.000Z'),
    createdAt: new Date('2026-11-22T09:00:00.000Z'),
  };

  it('shows channels and automation on lights only, connectivity only with health_read', () => {
    expect(deviceView(light, { permissions: [], allowed_channels: ['sound', 'light1'] })).toEqual({
      device_id: ID,
      name: null,
      product: 'light',
      channels: ['light1', 'sound'],
      automation_enabled: true,
    });
    expect(deviceView({ ...light, product: 'meter' }, { permissions: ['health_read'], allowed_channels: ['light1'] })).toEqual({
      device_id: ID,
      name: null,
      product: 'meter',
      status: 'connected',
      status_changed_at: '2026-11-22T10:00:00.000Z',
      last_seen_at: '2026-11-22T10:05:00.000Z',
    });
  });
});
