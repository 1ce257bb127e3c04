-- DropIndex
DROP INDEX "deliveries_webhook_id_ordering_key_seq_idx";

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "redelivery_asked" BOOLEAN NOT NULL DEFAULT false;

-- CreateIndex
CREATE INDEX "deliveries_webhook_id_state_next_attempt_at_seq_idx" ON "deliveries"("webhook_id", "state", "next_attempt_at", "seq");

-- CreateIndex
CREATE INDEX "deliveries_lease_until_idx" ON "deliveries"("lease_until");

-- CreateIndex
CREATE INDEX "deliveries_webhook_id_ordering_key_state_seq_idx" ON "deliveries"("webhook_id", "ordering_key", "state", "seq");
