import { defineConfig } from 'prisma/config';

// Migrations are applied by the service itself at start (see @fleet/db); this config lets
// `prisma generate` and, where the schema engine exists, `prisma migrate deploy` find them.
export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/fleet_events' },
});
