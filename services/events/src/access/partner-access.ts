/**
 * What partners may see now (permissions and org grants), asked of the gateway, which owns
 * partners (`gateway.partner.access`), and trusted for ACCESS_CACHE_MS: a revoked permission or
 * grant stops deliveries and stream events within that time. A disabled or unknown partner
 * receives nothing.
 */
import { randomUUID } from 'node:crypto';
import type { Permission } from '@fleet/contracts';
import { fromEnvelopeError, ServiceUnavailableError, type Bus } from '@fleet/service-kit';
import { receivableTypes, type PartnerAccess } from '../domain/audience';

const ASK_MAX = 1000;

export class PartnerAccessDirectory {
  private readonly known = new Map<string, { access: PartnerAccess | null; at: number }>();

  constructor(
    private readonly bus: Bus,
    private readonly options: { cacheMs: number; timeoutMs: number },
  ) {}

  /** Access of each partner that exists and is enabled; others are absent. Rejects (503) when the gateway cannot be asked. */
  async accessOf(partnerIds: Iterable<string>): Promise<Map<string, PartnerAccess>> {
    const now = Date.now();
    const ids = [...new Set(partnerIds)];
    const stale = ids.filter((id) => {
      const entry = this.known.get(id);
      return !entry || now - entry.at >= this.options.cacheMs;
    });
    for (let k = 0; k < stale.length; k += ASK_MAX) await this.ask(stale.slice(k, k + ASK_MAX), now);
    const found = new Map<string, PartnerAccess>();
    for (const id of ids) {
      const access = this.known.get(id)?.access;
      if (access) found.set(id, access);
    }
    return found;
  }

  /**
   * Whether the partner may still receive an event of the type (enabled, holding its
   * permission): asked before each delivery attempt. When the gateway cannot be asked,
   * deliveries go on as the fan-out decided.
   */
  async mayStillReceive(partnerId: string, eventType: string): Promise<boolean> {
    let partner: PartnerAccess | undefined;
    try {
      partner = (await this.accessOf([partnerId])).get(partnerId);
    } catch {
      return true;
    }
    return partner !== undefined && receivableTypes(partner, [eventType]).length === 1;
  }

  private async ask(ids: string[], now: number): Promise<void> {
    const reply = await this.bus.request(
      'gateway.partner.access',
      { request_id: `events-${randomUUID()}`, params: {}, query: {}, body: { partner_ids: ids as [string, ...string[]] } },
      { timeoutMs: this.options.timeoutMs },
    );
    if (!reply.ok) throw reply.error.status >= 500 ? new ServiceUnavailableError() : fromEnvelopeError(reply.error);
    if (!reply.body) throw new ServiceUnavailableError();
    for (const id of ids) this.known.set(id, { access: null, at: now });
    for (const p of reply.body.partners) {
      this.known.set(p.partner_id, { access: { partnerId: p.partner_id, permissions: new Set(p.permissions as Permission[]), orgGrants: p.org_grants }, at: now });
    }
  }
}
