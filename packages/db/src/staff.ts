import { ensureDatabase } from './database';
import { migrate } from './migrate';

/**
 * Opens a service's own database for a staff command: creates and migrates it first, so the
 * command works whether or not the service has ever run, and always disconnects afterwards.
 */
export async function withMigratedDatabase<Db extends { $disconnect(): Promise<void> }, T>(
  databaseUrl: string,
  migrationsDir: string,
  open: (url: string) => Db,
  work: (db: Db) => Promise<T>,
): Promise<T> {
  await ensureDatabase(databaseUrl);
  await migrate(databaseUrl, migrationsDir);
  const db = open(databaseUrl);
  try {
    return await work(db);
  } finally {
    await db.$disconnect();
  }
}

/**
 * The contract every staff CLI keeps: one JSON object on stdout, or a message on stderr and a
 * non-zero exit: 2 for the operator's mistakes (`isUsageError`, shown as they are), 1 for failures.
 */
export function runStaffCli(main: () => Promise<Record<string, unknown>>, isUsageError: (err: unknown) => boolean): void {
  main().then(
    (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
    (err: unknown) => {
      const message = isUsageError(err) ? (err as Error).message : `failed: ${(err as Error)?.message ?? String(err)}`;
      process.stderr.write(`admin: ${message}\n`);
      process.exit(isUsageError(err) ? 2 : 1);
    },
  );
}
