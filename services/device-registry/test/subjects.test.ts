/** The subjects this service serves are exactly those proto-schemas/subjects.json gives it. */
import { requestSubjects } from '@fleet/contracts';
import { REGISTRY_SUBJECTS } from '../src/handlers/registry';

it('serves every request subject proto-schemas gives device-registry, and no other', () => {
  const owned = Object.entries(requestSubjects)
    .filter(([, subject]) => subject.owner === 'device-registry')
    .map(([name]) => name);
  expect([...REGISTRY_SUBJECTS].sort()).toEqual(owned.sort());
});
