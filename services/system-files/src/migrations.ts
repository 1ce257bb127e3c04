import path from 'node:path';

/** system-files' SQL migrations, applied at start by the service. */
export const MIGRATIONS_DIR = path.resolve(__dirname, '../prisma/migrations');
