import { subjectsOf, type SubjectsOf } from '@fleet/contracts';
import type { Bus, ServiceHandlers } from '@fleet/service-kit';
import { getEnergy, getSummary, listIntervals } from './reads';
import { getReset, getSample, requestReset, requestSample, sendReport, type RequestDeps } from './requests';

/** Every request subject the meter serves: those proto-schemas/subjects.json gives it. */
export type MeterSubject = SubjectsOf<'meter'>;
export const METER_SUBJECTS: readonly MeterSubject[] = subjectsOf('meter');

/** The meter's one map of what it serves; the type check fails when a subject lacks its handler. */
export function meterHandlers(deps: RequestDeps): ServiceHandlers<MeterSubject> {
  const { db } = deps;
  return {
    'meter.interval.list': (req) => listIntervals(db, req),
    'meter.summary.get': (req) => getSummary(db, req),
    'meter.energy.get': (req) => getEnergy(db, req),
    'meter.report.send': (req) => sendReport(deps, req),
    'meter.sample.create': (req, ctx) => requestSample(deps, req, ctx.logger),
    'meter.sample.get': (req) => getSample(deps, req),
    'meter.reset.create': (req, ctx) => requestReset(deps, req, ctx.logger),
    'meter.reset.get': (req) => getReset(deps, req),
  };
}

/** Serves the meter's subjects. The bus answers a database out of reach as 503. */
export function serveMeter(bus: Bus, deps: RequestDeps): void {
  bus.serveAll(meterHandlers(deps));
}
