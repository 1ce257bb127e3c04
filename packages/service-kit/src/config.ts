import { z } from 'zod';

/** Settings every service reads. A service extends this schema with its own. */
export const baseConfigSchema = z.object({
  NATS_URL: z.string().default('nats://127.0.0.1:4222'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  HEALTH_PORT: z.coerce.number().int().min(0).max(65535),
  SERVICE_INSTANCE: z.string().optional(),
  /** How long a request over the bus may take before the caller answers 503. */
  BUS_REQUEST_TIMEOUT_MS: z.coerce.number().int().positive().default(3000),
});

export type BaseConfig = z.infer<typeof baseConfigSchema>;

/** Reads and validates configuration; the error lists every bad or missing variable. */
export function loadConfig<S extends z.ZodType>(schema: S, env: Record<string, string | undefined> = process.env): z.infer<S> {
  const result = schema.safeParse(env);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  return result.data;
}

/** A boolean environment flag: 'true', '1', 'yes' are true. */
export const envFlag = (fallback: boolean) =>
  z
    .string()
    .optional()
    .transform((v) => (v === undefined || v === '' ? fallback : ['true', '1', 'yes'].includes(v.toLowerCase())));

export { z };
