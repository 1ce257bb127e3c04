-- (scripts/migration-diff.sh also proposed re-creating "readings_pkey" without its INCLUDE
-- columns, which Prisma's schema cannot express: left out, see prisma/schema.prisma, Reading.)

-- AlterTable
ALTER TABLE "alert_states" ADD COLUMN     "write_requests" INTEGER NOT NULL DEFAULT 0;
