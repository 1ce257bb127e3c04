/** The handler map serves exactly the subjects proto-schemas/subjects.json gives meter. */
import { requestSubjects } from '@fleet/contracts';
import { meterHandlers } from '../src/handlers/serve';

it('serves every request subject proto-schemas gives meter, and no other', () => {
  const owned = Object.entries(requestSubjects)
    .filter(([, subject]) => subject.owner === 'meter')
    .map(([name]) => name);
  const handlers = meterHandlers({} as Parameters<typeof meterHandlers>[0]);
  expect(Object.keys(handlers).sort()).toEqual(owned.sort());
});
