-- The outbox of partner events (meter.records_stored, meter.sample_settled,
-- meter.energy_reset_settled), written with the change each reports and moved to
-- PARTNER_EVENTS by the relay; and the index the no_reply sweep reads.
-- (The diff also re-set meter_state.epoch's default to the same expression, a no-op left out.)

-- CreateTable
CREATE TABLE "outbox_events" (
    "id" BIGSERIAL NOT NULL,
    "subject" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "msg_id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "outbox_events_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "sample_requests_state_deadline_at_idx" ON "sample_requests"("state", "deadline_at");
