/** The handler map serves exactly the subjects proto-schemas/subjects.json gives config-alerting. */
import { requestSubjects } from '@fleet/contracts';
import { configHandlers } from '../src/handlers/serve';
import type { DeviceConfigDeps } from '../src/handlers/device-config';

it('serves every request subject proto-schemas gives config-alerting, and no other', () => {
  const owned = Object.entries(requestSubjects)
    .filter(([, subject]) => subject.owner === 'config-alerting')
    .map(([name]) => name);
  expect(Object.keys(configHandlers({} as DeviceConfigDeps)).sort()).toEqual(owned.sort());
});
