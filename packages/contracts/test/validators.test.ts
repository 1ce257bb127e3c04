import { checkEvent, checkReplyEnvelope, checkRequestEnvelope, ContractViolation, PERMISSIONS, CHANNELS } from '@fleet/contracts';

describe('contracts', () => {
  it('lists the 22 permissions of the spec and the two of push events, and the 5 channels', () => {
    expect(PERMISSIONS).toHaveLength(24);
    expect(PERMISSIONS).toContain('energy_reset');
    expect(PERMISSIONS.slice(-2)).toEqual(['events_read', 'webhook_manage']);
    expect(CHANNELS).toEqual(['light1', 'light2', 'light3', 'sound', 'contact']);
  });

  it('accepts a well-formed request envelope with a principal and device', () => {
    const envelope = {
      request_id: 'r1',
      route: 'GET /v1/devices/{device_id}',
      params: { device_id: '0123456789AB' },
      query: {},
      principal: {
        partner_id: 'p1', name: 'Acme', key_prefix: 'pk_abc', permissions: ['state_read'], org_grants: [1],
        allowed_channels: ['light1'], limits: { requests_per_min: 600, device_commands_per_min: 60 },
      },
      device: { device_id: '0123456789AB', product: 'light', org_node_id: 3 },
    };
    expect(checkRequestEnvelope(envelope)).toBe(envelope);
  });

  it('refuses an envelope with an unknown permission or a lowercase device id', () => {
    const base = { request_id: 'r', params: {}, query: {} };
    expect(() => checkRequestEnvelope({ ...base, device: { device_id: 'abc', product: 'light', org_node_id: null } })).toThrow(ContractViolation);
    expect(() =>
      checkRequestEnvelope({
        ...base,
        principal: { partner_id: 'p', name: 'n', key_prefix: 'k', permissions: ['root'], org_grants: [], allowed_channels: [], limits: { requests_per_min: 1, device_commands_per_min: 1 } },
      }),
    ).toThrow(/permissions/);
  });

  it('tells success and error replies apart and refuses mixtures', () => {
    expect(checkReplyEnvelope({ ok: true, status: 200, body: { a: 1 } })).toEqual({ ok: true, status: 200, body: { a: 1 } });
    expect(checkReplyEnvelope({ ok: false, error: { status: 404, code: 'not_found', message: 'no' } }).ok).toBe(false);
    expect(() => checkReplyEnvelope({ ok: true, status: 404 })).toThrow(ContractViolation);
    expect(() => checkReplyEnvelope({ ok: false, error: { status: 200, code: 'x', message: 'y' } })).toThrow(ContractViolation);
    expect(() => checkReplyEnvelope({ ok: false, status: 200 })).toThrow(ContractViolation);
  });

  it('checks events against the schema their subject names', () => {
    const event = { device_id: '0123456789AB', change: 'removed', at: new Date().toISOString() };
    expect(checkEvent('evt.registry.device.changed.v1', event)).toEqual(event);
    expect(() => checkEvent('evt.registry.device.changed.v1', { ...event, at: 'yesterday' })).toThrow(/format/);
  });
});
