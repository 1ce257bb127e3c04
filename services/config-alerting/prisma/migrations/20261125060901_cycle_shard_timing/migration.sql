-- AlterTable
ALTER TABLE "cycle_shards" ADD COLUMN     "claimed_at" TIMESTAMPTZ(3),
ADD COLUMN     "devices" INTEGER,
ADD COLUMN     "settled_at" TIMESTAMPTZ(3),
ADD COLUMN     "writes" INTEGER;
