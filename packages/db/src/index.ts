export { ensureDatabase, dropDatabase } from './database';
export { migrate, readMigrations, PRISMA_MIGRATE_LOCK_KEY } from './migrate';
export type { MigrateLogger, MigrateOptions, MigrateResult } from './migrate';
export { createPrismaClient } from './prisma';
export type { PrismaClientOptions } from './prisma';
export { createPreparedReader } from './prepared-reader';
export type { PreparedReader } from './prepared-reader';
export { databaseUrlFor, databaseNameOf } from './url';
export { withMigratedDatabase, runStaffCli } from './staff';
export {
  COMMIT_DEADLINE_SQLSTATE,
  COMMIT_GUARD_SCHEMA,
  CommitDeadlineError,
  commitBy,
  ensureCommitGuard,
  installCommitGuard,
  isCommitDeadlineFailure,
  statementBy,
  transactionBy,
} from './commit-guard';
export type { CommitWindow, RawExecutor, TransactionalClient, TransactionOptions } from './commit-guard';
