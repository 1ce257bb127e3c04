-- CreateTable
CREATE TABLE "device_removals" (
    "device_id" TEXT NOT NULL,
    "removed_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "device_removals_pkey" PRIMARY KEY ("device_id")
);
