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
