import pino, { type DestinationStream, type Logger } from 'pino';
import { currentWork } from './trace';

export type { Logger };

/** Paths never written to logs: credentials, keys and secrets wherever they appear. */
export const REDACT_PATHS = [
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  '*.password',
  '*.root_secret',
  '*.mqtt_password',
  '*.secret',
  '*.key',
  '*.token',
  'body.password',
  'body.root_secret',
  'body.mqtt_password',
];

/**
 * Every line written while handling a request carries its `request_id` and `trace_id`
 * (trace.ts keeps them for the request's async work); what a call passes itself wins.
 */
function workFields(): Record<string, string> {
  const work = currentWork();
  if (!work) return {};
  return work.requestId === undefined ? { trace_id: work.trace.traceId } : { request_id: work.requestId, trace_id: work.trace.traceId };
}

/** A service's logger; lines go to stdout unless a destination is given (tests). */
export function createLogger(service: string, level = 'info', instance?: string, destination?: DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { service, ...(instance ? { instance } : {}) },
    mixin: workFields,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}

/**
 * For a cleanup that runs while another failure is being handled (releasing a slot, rolling
 * back a claim): its own failure must not replace that error, and must not vanish either. Use
 * as `.catch(warnIfFails(logger, 'releasing the sample slot', { request_id }))`.
 */
export function warnIfFails(logger: Logger, what: string, bindings: Record<string, unknown> = {}): (err: unknown) => void {
  return (err) => logger.warn({ ...bindings, err }, `${what} failed`);
}
