-- What the meter's clock read at a clear (estimated from its newest accepted record): a record
-- the meter made before the clear and sent after it (offline meanwhile) is told by its end.
-- Clears made before this column existed leave it null and are judged as before.
ALTER TABLE "meter_clears" ADD COLUMN "meter_clock_at_clear" TIMESTAMPTZ(3);
