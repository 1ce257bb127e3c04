import { randomUUID } from 'node:crypto';
import { CHANNELS, type Principal } from '@fleet/contracts';

/** A random UUID-shaped partner id, as the gateway issues them. */
export function partnerId(): string {
  return randomUUID();
}

/** The principal the gateway puts on a request envelope: no permissions, no grants, every channel, unless overridden. */
export function principal(overrides: Partial<Principal> = {}): Principal {
  return {
    partner_id: partnerId(),
    name: 'Test partner',
    key_prefix: 'pk_test',
    permissions: [],
    org_grants: [],
    allowed_channels: [...CHANNELS],
    limits: { requests_per_min: 600, device_commands_per_min: 60 },
    ...overrides,
  };
}
