/** The handler map serves exactly the subjects proto-schemas/subjects.json gives light-command. */
import { requestSubjects } from '@fleet/contracts';
import { lightHandlers, type LightDeps } from '../src/handlers/light';

it('serves every request subject proto-schemas gives light-command, and no other', () => {
  const owned = Object.entries(requestSubjects)
    .filter(([, subject]) => subject.owner === 'light-command')
    .map(([name]) => name);
  expect(Object.keys(lightHandlers({} as LightDeps)).sort()).toEqual(owned.sort());
});
