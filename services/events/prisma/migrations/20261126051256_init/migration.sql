-- CreateTable
CREATE TABLE "webhooks" (
    "id" TEXT NOT NULL,
    "partner_id" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "event_types" TEXT[],
    "description" TEXT,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "secret" TEXT NOT NULL,
    "previous_secret" TEXT,
    "previous_expires_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhooks_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "deliveries" (
    "id" TEXT NOT NULL,
    "seq" BIGSERIAL NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "partner_id" TEXT NOT NULL,
    "event_id" TEXT NOT NULL,
    "event_type" TEXT NOT NULL,
    "device_id" TEXT,
    "ordering_key" TEXT NOT NULL,
    "event" JSONB NOT NULL,
    "state" TEXT NOT NULL DEFAULT 'pending',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) DEFAULT CURRENT_TIMESTAMP,
    "lease_until" TIMESTAMPTZ(3),
    "last_attempt_at" TIMESTAMPTZ(3),
    "last_status" INTEGER,
    "last_error" TEXT,
    "last_duration_ms" INTEGER,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "delivered_at" TIMESTAMPTZ(3),

    CONSTRAINT "deliveries_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "stream_leases" (
    "id" TEXT NOT NULL,
    "partner_id" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "stream_leases_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "webhooks_partner_id_created_at_idx" ON "webhooks"("partner_id", "created_at");

-- CreateIndex
CREATE INDEX "deliveries_webhook_id_seq_idx" ON "deliveries"("webhook_id", "seq" DESC);

-- CreateIndex
CREATE INDEX "deliveries_state_next_attempt_at_idx" ON "deliveries"("state", "next_attempt_at");

-- CreateIndex
CREATE INDEX "deliveries_webhook_id_ordering_key_seq_idx" ON "deliveries"("webhook_id", "ordering_key", "seq");

-- CreateIndex
CREATE INDEX "deliveries_created_at_idx" ON "deliveries"("created_at");

-- CreateIndex
CREATE UNIQUE INDEX "deliveries_webhook_id_event_id_key" ON "deliveries"("webhook_id", "event_id");

-- CreateIndex
CREATE UNIQUE INDEX "deliveries_seq_key" ON "deliveries"("seq");

-- CreateIndex
CREATE INDEX "stream_leases_partner_id_expires_at_idx" ON "stream_leases"("partner_id", "expires_at");

-- AddForeignKey
ALTER TABLE "deliveries" ADD CONSTRAINT "deliveries_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE ON UPDATE CASCADE;
