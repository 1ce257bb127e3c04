import { ApiError, ServiceUnavailableError, type Bus, type RequestHandler } from '@fleet/service-kit';
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
] as const;

export function meterHandlers(db: MeterDb, deps: RequestDeps): Record<(typeof METER_SUBJECTS)[number], RequestHandler> {
  return {
    'meter.interval.list': (req) => listIntervals(db, req),
    'meter.summary.get': (req) => getSummary(db, req),
    'meter.energy.get': (req) => getEnergy(db, req),
    'meter.report.send': (req) => sendReport(deps, req),
    'meter.sample.create': (req) => requestSample(deps, req),
    'meter.sample.get': (req) => getSample(deps, req),
    'meter.reset.create': (req) => requestReset(deps, req),
    'meter.reset.get': (req) => getReset(deps, req),
  };
}

/** Driver adapter error kinds that mean the database cannot be used right now. */
const OUTAGE_KINDS = ['DatabaseNotReachable', 'DatabaseDoesNotExist', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections', 'TransactionStartTimeout'];

/** Postgres out of reach (refused, dropped, timed out, pool exhausted): the partner gets 503, not 500. */
export function isStoreOutage(err: unknown): boolean {
  const e = err as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown } | undefined;
  if (!e || typeof e !== 'object') return false;
  const code = typeof e.code === 'string' ? e.code : '';
  if (['P1001', 'P1002', 'P1008', 'P1017', 'P2024', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', '57P01', '57P03', '53300'].includes(code)) return true;
  if (e.name === 'PrismaClientInitializationError') return true;
  const kind = (e as { meta?: { driverAdapterError?: { cause?: { kind?: unknown } } } }).meta?.driverAdapterError?.cause?.kind;
  if (typeof kind === 'string' && OUTAGE_KINDS.includes(kind)) return true;
  if (typeof e.message === 'string' && /ECONNREFUSED|ECONNRESET|Connection terminated|connection timeout|too many clients|Can't reach database server/i.test(e.message)) return true;
  return e.cause !== undefined && e.cause !== err && isStoreOutage(e.cause);
}

function guarded(handler: RequestHandler): RequestHandler {
  return async (req, ctx) => {
    try {
      return await handler(req, ctx);
    } catch (err) {
      if (err instanceof ApiError || !isStoreOutage(err)) throw err;
      ctx.logger.warn({ err }, 'meter store unavailable');
      throw new ServiceUnavailableError();
    }
  };
}

/** Serves the meter's subjects (under a prefix in tests). */
export function serveMeter(bus: Bus, db: MeterDb, deps: RequestDeps, prefix = ''): void {
  for (const [subject, handler] of Object.entries(meterHandlers(db, deps))) bus.serve(`${prefix}${subject}`, guarded(handler));
}
