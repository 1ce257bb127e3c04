-- The retention delete (readings older than READINGS_RETENTION_MS, every cycle) read the whole
-- table for want of an index on `at`: seconds per cycle on a day of readings from 50,000
-- sensors. Readings arrive roughly in time order, so a block-range index finds the oldest pages
-- alone, and costs next to nothing per insert (a B-tree on `at` would slow the ingest).
-- CreateIndex
CREATE INDEX "readings_at_idx" ON "readings" USING BRIN ("at");
