/** The handler map serves exactly the subjects proto-schemas/subjects.json gives device-registry. */
import { requestSubjects } from '@fleet/contracts';
import { registryHandlers, type RegistryDeps } from '../src/handlers/registry';

it('serves every request subject proto-schemas gives device-registry, and no other', () => {
  const owned = Object.entries(requestSubjects)
    .filter(([, subject]) => subject.owner === 'device-registry')
    .map(([name]) => name);
  const handlers = registryHandlers({} as RegistryDeps);
  expect(Object.keys(handlers).sort()).toEqual(owned.sort());
});
