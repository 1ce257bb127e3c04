/**
 * gateway.partner.access on the real NATS server and the gateway's own Postgres database: what
 * each asked partner may see now, exactly as the principal of its requests carries it (an echo
 * route shows the principal), with disabled and unknown partners absent.
 */
import { randomUUID } from 'node:crypto';
import { requestSubjects, type Principal } from '@fleet/contracts';
import type { RequestOf } from '@fleet/service-kit';
import { testSubject, uniqueId } from '@fleet/test-kit';
import { gatewayHandlers, type GatewayHandlerDeps } from '../src/handlers/bus-handlers';
import type { RouteDef } from '../src/routes/types';
import { call, startTestGateway, type TestGateway } from './support/harness';

const whoami = testSubject(`test.${uniqueId('pa')}.whoami`);
const echoRoute: RouteDef = {
  method: 'GET', path: '/v1/whoami', operationId: 'whoami', tag: 'Test', summary: 'the principal', permission: null, target: { subject: whoami }, responses: { 200: { description: 'ok' } },
};

let gw: TestGateway;

beforeAll(async () => {
  gw = await startTestGateway([echoRoute]);
  gw.bus.serve(whoami, async (req) => ({ body: { principal: req.principal } }));
  gw.bus.serveAll(gatewayHandlers({ db: gw.db }));
  await gw.bus.connection.flush();
});

afterAll(async () => {
  await gw?.close();
});

type AccessEnvelope = RequestOf<'gateway.partner.access'>;
const ask = (partnerIds: string[]) =>
  gw.bus.request('gateway.partner.access', { request_id: uniqueId('req'), params: {}, query: {}, body: { partner_ids: partnerIds } } as AccessEnvelope);

async function principalOf(key: string): Promise<Principal> {
  const res = await call(gw.url, 'GET', '/v1/whoami', { key });
  expect(res.status).toBe(200);
  return res.body.principal as Principal;
}

it('serves every request subject proto-schemas gives the gateway, and no other', () => {
  const owned = Object.entries(requestSubjects)
    .filter(([, subject]) => subject.owner === 'gateway')
    .map(([name]) => name);
  expect(Object.keys(gatewayHandlers({} as GatewayHandlerDeps)).sort()).toEqual(owned.sort());
});

it('answers each enabled partner’s permissions and org grants as its requests’ principal carries them', async () => {
  const scoped = await gw.partner(['--permissions', 'events_read,health_read,energy_read', '--grant', '7', '--grant', '12']);
  const everywhere = await gw.partner(['--permissions', 'webhook_manage', '--access-all-devices']);
  const none = await gw.partner([]);

  const reply = await ask([everywhere.id, scoped.id, none.id]);
  expect(reply.ok).toBe(true);
  if (!reply.ok) return;
  const partners = reply.body?.partners ?? [];
  expect(partners.map((p) => p.partner_id)).toEqual([everywhere.id, scoped.id, none.id]);
  for (const [partner, key] of [[partners[0], everywhere.key], [partners[1], scoped.key], [partners[2], none.key]] as const) {
    const principal = await principalOf(key);
    expect(partner).toEqual({ partner_id: principal.partner_id, permissions: principal.permissions, org_grants: principal.org_grants });
  }
  expect(partners[1]).toMatchObject({ permissions: ['health_read', 'energy_read', 'events_read'], org_grants: [7, 12] });
  expect({ ...partners[0], permissions: [...(partners[0]?.permissions ?? [])].sort() }).toMatchObject({ permissions: ['access_all_devices', 'webhook_manage'], org_grants: [] });
  expect(partners[2]).toMatchObject({ permissions: [], org_grants: [] });
});

it('follows a change of permissions and grants at once, and leaves disabled and unknown partners out', async () => {
  const p = await gw.partner(['--permissions', 'events_read', '--grant', '3']);
  const gone = await gw.partner(['--permissions', 'events_read', '--grant', '3']);
  await gw.admin('partner', 'update', '--id', p.id, '--permissions', 'events_read,system_read', '--grant', '4');
  await gw.admin('partner', 'disable', '--id', gone.id);

  const reply = await ask([gone.id, randomUUID(), 'not-a-partner-id', p.id.toUpperCase(), '']);
  expect(reply.ok && reply.body).toEqual({
    partners: [{ partner_id: p.id.toUpperCase(), permissions: ['system_read', 'events_read'], org_grants: [4] }],
  });
  expect((await principalOf(p.key)).org_grants).toEqual([4]);
  const nobody = await ask([gone.id]);
  expect(nobody.ok && nobody.body).toEqual({ partners: [] });
});

it('takes 1 to 1000 distinct ids, refusing other lists with 400 validation_error', async () => {
  const p = await gw.partner(['--permissions', 'events_read']);
  const many = [p.id, ...Array.from({ length: 999 }, () => randomUUID())];
  const reply = await ask(many);
  expect(reply.ok && reply.body?.partners.map((x) => x.partner_id)).toEqual([p.id]);

  for (const ids of [[], [...many, randomUUID()], [p.id, p.id]]) {
    // Sent as a hand-made envelope: the caller's own bus refuses such a body before sending it.
    const raw = await gw.bus.connection.request(`${gw.unique}.gateway.partner.access`, Buffer.from(JSON.stringify({ request_id: 'r', params: {}, query: {}, body: { partner_ids: ids } })), { timeout: 2000 });
    const answer = JSON.parse(Buffer.from(raw.data).toString('utf8')) as { ok: boolean; error?: { status: number; code: string } };
    expect({ ids: ids.length, ok: answer.ok, error: answer.error && { status: answer.error.status, code: answer.error.code } }).toEqual({
      ids: ids.length,
      ok: false,
      error: { status: 400, code: 'validation_error' },
    });
  }
});
