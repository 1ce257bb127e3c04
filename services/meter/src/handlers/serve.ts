import { subjectsOf, type SubjectsOf } from '@fleet/contracts';
import { JsonBody, type Bus, type HandlerResult, type ServiceHandlers } from '@fleet/service-kit';
import { getEnergy, getSummary, listIntervals } from './reads';
import { getReset, getSample, requestReset, requestSample, sendReport, type RequestDeps } from './requests';

/** Every request subject the meter serves: those proto-schemas/subjects.json gives it. */
export type MeterSubject = SubjectsOf<'meter'>;
export const METER_SUBJECTS: readonly MeterSubject[] = subjectsOf('meter');

/** The meter's one map of what it serves; the type check fails when a subject lacks its handler. */
export function meterHandlers(deps: RequestDeps): ServiceHandlers<MeterSubject> {
  const { db } = deps;
  const readDb = deps.readDb ?? db;
  return {
    'meter.interval.list': (req) => listIntervals(db, req, new Date(), readDb).then(asJsonText),
    'meter.summary.get': (req) => getSummary(readDb, req).then(asJsonText),
    'meter.energy.get': (req) => getEnergy(readDb, req).then(asJsonText),
    'meter.report.send': (req) => sendReport(deps, req),
    'meter.sample.create': (req, ctx) => requestSample(deps, req, ctx.logger),
    'meter.sample.get': (req, ctx) => getSample(deps, req, ctx),
    'meter.reset.create': (req, ctx) => requestReset(deps, req, ctx.logger),
    'meter.reset.get': (req) => getReset(deps, req),
  };
}

/**
 * A read's answer written as JSON text here, once: a page of a thousand records is about 600 KB,
 * and the bus and the gateway carry these bytes as they are instead of parsing and serializing
 * them again on the way to the partner.
 */
function asJsonText(result: HandlerResult): HandlerResult {
  return result.body === undefined || result.body instanceof JsonBody ? result : { ...result, body: JsonBody.of(result.body) };
}

/** Serves the meter's subjects. The bus answers a database out of reach as 503. */
export function serveMeter(bus: Bus, deps: RequestDeps): void {
  bus.serveAll(meterHandlers(deps));
}
