-- CreateTable
CREATE TABLE "settings_snapshots" (
    "device_id" TEXT NOT NULL,
    "settings" JSONB NOT NULL,
    "received_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "settings_snapshots_pkey" PRIMARY KEY ("device_id")
);

-- CreateTable
CREATE TABLE "responses" (
    "id" BIGSERIAL NOT NULL,
    "device_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "line" TEXT NOT NULL,
    "command" TEXT,
    "result" TEXT,
    "received_at" TIMESTAMPTZ(3) NOT NULL,
    "msg_id" TEXT NOT NULL,

    CONSTRAINT "responses_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "platform_files" (
    "dir" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "size" BIGINT NOT NULL,
    "sha256" TEXT NOT NULL,
    "audio" JSONB,
    "storage_key" TEXT NOT NULL,
    "modified_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "platform_files_pkey" PRIMARY KEY ("dir","name")
);

-- CreateTable
CREATE TABLE "file_transfers" (
    "id" TEXT NOT NULL,
    "device_id" TEXT NOT NULL,
    "partner_id" TEXT NOT NULL,
    "idempotency_key" TEXT,
    "fingerprint" TEXT NOT NULL,
    "state" TEXT NOT NULL,
    "src" TEXT NOT NULL,
    "dest" TEXT NOT NULL,
    "sha256" TEXT NOT NULL,
    "corr_mode" TEXT NOT NULL,
    "line" TEXT NOT NULL DEFAULT '',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "detail" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "sent_at" TIMESTAMPTZ(3),
    "ack_deadline" TIMESTAMPTZ(3),
    "settled_at" TIMESTAMPTZ(3),

    CONSTRAINT "file_transfers_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "responses_device_id_id_idx" ON "responses"("device_id", "id");

-- CreateIndex
CREATE INDEX "responses_device_id_received_at_idx" ON "responses"("device_id", "received_at");

-- CreateIndex
CREATE INDEX "responses_received_at_idx" ON "responses"("received_at");

-- CreateIndex
CREATE UNIQUE INDEX "responses_device_id_msg_id_key" ON "responses"("device_id", "msg_id");

-- CreateIndex
CREATE INDEX "file_transfers_device_id_created_at_idx" ON "file_transfers"("device_id", "created_at");

-- CreateIndex
CREATE INDEX "file_transfers_state_ack_deadline_idx" ON "file_transfers"("state", "ack_deadline");

-- CreateIndex
CREATE UNIQUE INDEX "file_transfers_partner_id_idempotency_key_key" ON "file_transfers"("partner_id", "idempotency_key");
