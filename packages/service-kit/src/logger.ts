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
