import pino, { type Logger } from 'pino';

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

export function createLogger(service: string, level = 'info', instance?: string): Logger {
  return pino({
    level,
    base: { service, ...(instance ? { instance } : {}) },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}

/**
 * For a cleanup that runs while another failure is being handled (releasing a slot, rolling
 * back a claim): its own failure must not replace that error, and must not vanish either. Use
 * as `.catch(warnIfFails(logger, 'releasing the sample slot', { request_id }))`.
 */
export function warnIfFails(logger: Logger, what: string, bindings: Record<string, unknown> = {}): (err: unknown) => void {
  return (err) => logger.warn({ ...bindings, err }, `${what} failed`);
}
