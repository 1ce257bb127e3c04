-- CreateTable
CREATE TABLE "device_place_changes" (
    "event_id" TEXT NOT NULL,
    "seq" BIGINT NOT NULL,
    "device_id" TEXT NOT NULL,
    "from_node" INTEGER,
    "to_node" INTEGER,
    "recorded_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "device_place_changes_pkey" PRIMARY KEY ("event_id")
);

-- CreateIndex
CREATE INDEX "device_place_changes_device_id_seq_idx" ON "device_place_changes"("device_id", "seq");

-- CreateIndex
CREATE INDEX "device_place_changes_recorded_at_idx" ON "device_place_changes"("recorded_at");
