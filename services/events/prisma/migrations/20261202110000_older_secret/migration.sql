-- A rotation made while the previous secret still signs keeps it signing until its own expiry,
-- as the one before the previous: a rotation retried after a lost answer, or two at once, no
-- longer drops a secret a receiver may still check with.
ALTER TABLE "webhooks" ADD COLUMN     "older_expires_at" TIMESTAMPTZ(3),
ADD COLUMN     "older_secret" TEXT;
