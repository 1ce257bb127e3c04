import type { RequestSubject } from '@fleet/contracts';
import type { Bus, RequestHandler } from '@fleet/service-kit';
import type { MeterDb } from '../store/prisma';
import { getEnergy, getSummary, listIntervals } from './reads';
import { getReset, getSample, requestReset, requestSample, sendReport, type RequestDeps } from './requests';

/** Every request subject the meter serves (proto-schemas/subjects.json). */
export const METER_SUBJECTS = [
  'meter.interval.list',
  'meter.summary.get',
  'meter.energy.get',
  'meter.report.send',
  'meter.sample.create',
  'meter.sample.get',
  'meter.reset.create',
  'meter.reset.get',
] as const satisfies readonly RequestSubject[];

export function meterHandlers(db: MeterDb, deps: RequestDeps): Record<(typeof METER_SUBJECTS)[number], RequestHandler> {
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

/** Serves the meter's subjects (under a prefix in tests). The bus answers a database out of reach as 503. */
export function serveMeter(bus: Bus, db: MeterDb, deps: RequestDeps, prefix = ''): void {
  for (const [subject, handler] of Object.entries(meterHandlers(db, deps))) bus.serve(`${prefix}${subject}`, handler);
}
