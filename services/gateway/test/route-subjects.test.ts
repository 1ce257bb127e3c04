/** Every route the gateway dispatches names a request subject of proto-schemas/, owned by another service. */
import { requestSubjects } from '@fleet/contracts';
import { routes } from '../src/routes/table';

it('dispatches every bus route to a subject in proto-schemas/subjects.json', () => {
  const unknown = routes
    .filter((route) => 'subject' in route.target)
    .map((route) => ({ route: `${route.method} ${route.path}`, subject: (route.target as { subject: string }).subject }))
    .filter(({ subject }) => {
      const known = (requestSubjects as Record<string, { owner: string } | undefined>)[subject];
      return !known || known.owner === 'gateway';
    });
  expect(unknown).toEqual([]);
  expect(routes.filter((route) => 'subject' in route.target).length).toBeGreaterThan(20);
});

it('leaves device resolution to the owner only where the owner is the registry and nothing needs the device first', () => {
  const owners = requestSubjects as Record<string, { owner: string } | undefined>;
  const ownerResolved = routes.filter((route) => route.device?.ownerResolves);
  expect(ownerResolved.map((route) => `${route.method} ${route.path}`).sort()).toEqual(['GET /v1/devices/{device_id}', 'GET /v1/devices/{device_id}/health']);
  for (const route of ownerResolved) {
    expect({ route: route.path, owner: owners[(route.target as { subject: string }).subject]?.owner, product: route.device?.product, limits: route.limits ?? [] }).toEqual({
      route: route.path,
      owner: 'device-registry',
      product: undefined,
      limits: [],
    });
  }
});
