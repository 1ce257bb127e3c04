import { subjectsOf, type SubjectsOf } from '@fleet/contracts';
import type { Bus, ServiceHandlers } from '@fleet/service-kit';
import { attach, changeSensor, detach, getConfig, setSignal, type DeviceConfigDeps } from './device-config';
import { createProfile, createSignal, deleteProfile, deleteSignal, listProfiles, listSignals, updateProfile, updateSignal } from './documents';

/** Every request subject config-alerting serves: those proto-schemas/subjects.json gives it. */
export type ConfigSubject = SubjectsOf<'config-alerting'>;
export const CONFIG_SUBJECTS: readonly ConfigSubject[] = subjectsOf('config-alerting');

/** config-alerting's one map of what it serves; the type check fails when a subject lacks its handler. */
export function configHandlers(deps: DeviceConfigDeps): ServiceHandlers<ConfigSubject> {
  const { db } = deps;
  return {
    'config.device.get': (req, ctx) => getConfig(deps, req, ctx),
    'config.sensor.attach': (req, ctx) => attach(db, req, ctx),
    'config.sensor.update': (req, ctx) => changeSensor(db, req, ctx),
    'config.sensor.detach': (req, ctx) => detach(db, req, ctx),
    'config.device.signal': (req, ctx) => setSignal(db, req, ctx),
    'config.profile.list': (req) => listProfiles(db, req),
    'config.profile.create': (req, ctx) => createProfile(db, req, ctx),
    'config.profile.update': (req, ctx) => updateProfile(db, req, ctx),
    'config.profile.delete': (req, ctx) => deleteProfile(db, req, ctx),
    'config.signal.list': (req) => listSignals(db, req),
    'config.signal.create': (req, ctx) => createSignal(db, req, ctx),
    'config.signal.update': (req, ctx) => updateSignal(db, req, ctx),
    'config.signal.delete': (req, ctx) => deleteSignal(db, req, ctx),
  };
}

/** Serves config-alerting's subjects. The bus answers a database out of reach as 503. */
export function serveConfig(bus: Bus, deps: DeviceConfigDeps): void {
  bus.serveAll(configHandlers(deps));
}
