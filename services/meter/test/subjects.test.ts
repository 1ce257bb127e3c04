/** The subjects this service serves are exactly those proto-schemas/subjects.json gives it. */
import { requestSubjects } from '@fleet/contracts';
import { METER_SUBJECTS } from '../src/handlers/serve';

it('serves every request subject proto-schemas gives meter, and no other', () => {
  const owned = Object.entries(requestSubjects)
    .filter(([, subject]) => subject.owner === 'meter')
    .map(([name]) => name);
  expect([...METER_SUBJECTS].sort()).toEqual(owned.sort());
});
