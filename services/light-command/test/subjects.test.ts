/** The subjects this service serves are exactly those proto-schemas/subjects.json gives it. */
import { requestSubjects } from '@fleet/contracts';
import { LIGHT_SUBJECTS } from '../src/handlers/light';

it('serves every request subject proto-schemas gives light-command, and no other', () => {
  const owned = Object.entries(requestSubjects)
    .filter(([, subject]) => subject.owner === 'light-command')
    .map(([name]) => name);
  expect([...LIGHT_SUBJECTS].sort()).toEqual(owned.sort());
});
