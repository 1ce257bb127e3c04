import path from 'node:path';

/** The meter's SQL migrations, applied at start by the service and by the admin CLI. */
export const MIGRATIONS_DIR = path.resolve(__dirname, '../prisma/migrations');
