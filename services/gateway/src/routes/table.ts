import { configRoutes } from './config';
import { deviceRoutes } from './devices';
import { eventRoutes } from './events';
import { meterRoutes } from './meter';
import { lightRoutes } from './lights';
import { systemRoutes } from './system';
import { accountSchema } from './schemas';
import type { RouteDef } from './types';

/**
 * Every partner route. Domain services add their rows here as they arrive; the gateway
 * needs no other change to route, check, validate, dispatch and document them.
 */
export const routes: RouteDef[] = [
  {
    method: 'GET',
    path: '/v1/account',
    operationId: 'getAccount',
    tag: 'Account',
    summary: 'The calling partner: name, key prefix, permissions, allowed channels and rate limits',
    permission: null,
    target: { local: 'account' },
    responses: { 200: { description: 'The account', schema: accountSchema } },
  },
  ...deviceRoutes,
  ...configRoutes,
  ...meterRoutes,
  ...lightRoutes,
  ...systemRoutes,
  ...eventRoutes,
];
