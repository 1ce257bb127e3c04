-- AlterTable
ALTER TABLE "meter_clears" ADD COLUMN     "max_start_at" TIMESTAMPTZ(3),
ADD COLUMN     "streams" JSONB NOT NULL DEFAULT '{}';

-- AlterTable
ALTER TABLE "meter_state" ALTER COLUMN "epoch" SET DEFAULT replace(gen_random_uuid()::text, '-', '');
