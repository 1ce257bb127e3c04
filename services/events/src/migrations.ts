import path from 'node:path';

/** The events service's SQL migrations, applied at start. */
export const MIGRATIONS_DIR = path.resolve(__dirname, '../prisma/migrations');
