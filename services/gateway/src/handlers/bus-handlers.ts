import type { SubjectsOf } from '@fleet/contracts';
import type { ServiceHandlers } from '@fleet/service-kit';
import { partnerAccess } from '../store/partners';
import type { GatewayDb } from '../store/prisma';

/** The request subjects proto-schemas/subjects.json gives the gateway (it owns partners). */
export type GatewaySubject = SubjectsOf<'gateway'>;

export interface GatewayHandlerDeps {
  db: GatewayDb;
}

/**
 * What the gateway serves over the bus, for other services (no principal): served with
 * `bus.serveAll` in main.ts. The bus checked each body against its schema (proto-schemas/gateway/).
 */
export function gatewayHandlers(deps: GatewayHandlerDeps): ServiceHandlers<GatewaySubject> {
  const { db } = deps;
  return {
    // The events service's view of who may receive what: the same permissions and grants the
    // principal of the partner's requests carries; disabled and unknown partners are absent.
    'gateway.partner.access': async ({ body }) => ({
      body: {
        partners: (await partnerAccess(db, body.partner_ids)).map((p) => ({ partner_id: p.partnerId, permissions: p.permissions, org_grants: p.orgGrants })),
      },
    }),
  };
}
