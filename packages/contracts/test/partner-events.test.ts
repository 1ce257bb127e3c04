import {
  checkEvent,
  ContractViolation,
  newPartnerEvent,
  PARTNER_EVENT_TYPES,
  partnerEventSubject,
  partnerEventTypeOf,
  permissionToReceive,
} from '@fleet/contracts';

describe('partner events', () => {
  it('lists the types with the permission each needs', () => {
    expect(PARTNER_EVENT_TYPES).toEqual([
      'device.connected', 'device.disconnected', 'device.provisioned', 'device.removed', 'device.moved',
      'alert.level_changed', 'system.ack_received', 'system.log_received', 'file_transfer.settled',
      'meter.records_stored', 'meter.sample_settled', 'meter.energy_reset_settled',
    ]);
    expect(Object.fromEntries(PARTNER_EVENT_TYPES.map((t) => [t, permissionToReceive(t)]))).toEqual({
      'device.connected': 'health_read',
      'device.disconnected': 'health_read',
      'device.provisioned': null,
      'device.removed': null,
      'device.moved': null,
      'alert.level_changed': 'config_read',
      'system.ack_received': 'system_read',
      'system.log_received': 'system_read',
      'file_transfer.settled': 'system_read',
      'meter.records_stored': 'energy_read',
      'meter.sample_settled': 'energy_read',
      'meter.energy_reset_settled': 'energy_reset',
    });
  });

  it('builds an event whose envelope and data match the contract, on its own subject', () => {
    const message = newPartnerEvent('meter.records_stored', { deviceId: '0123456789AB', data: { count: 3, cursor: 'c1' }, occurredAt: new Date('2026-11-26T00:00:00Z') });
    expect(message).toEqual({
      event: { id: expect.stringMatching(/^evt_[0-9a-f]{32}$/), type: 'meter.records_stored', version: 1, occurred_at: '2026-11-26T00:00:00.000Z', device_id: '0123456789AB', data: { count: 3, cursor: 'c1' } },
    });
    const subject = partnerEventSubject('meter.records_stored');
    expect(subject).toBe('evt.partner.meter.records_stored.v1');
    expect(checkEvent(subject, message)).toBe(message);
    expect(partnerEventTypeOf(`t1.${subject}`)).toBe('meter.records_stored');
    expect(partnerEventTypeOf('evt.partner.device.exploded.v1')).toBeUndefined();
  });

  it('refuses data its type does not allow', () => {
    expect(() => newPartnerEvent('meter.records_stored', { data: { count: 0, cursor: 'c' } })).toThrow(ContractViolation);
    expect(() => newPartnerEvent('device.moved', { data: { from_org_node_id: 1 } })).toThrow(/to_org_node_id/);
  });
});
