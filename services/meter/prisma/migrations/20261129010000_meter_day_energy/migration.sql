-- CreateTable
CREATE TABLE "meter_day_energy" (
    "device_id" TEXT NOT NULL,
    "day_s" BIGINT NOT NULL,
    "e_uwh" DECIMAL[],
    "e_n" INTEGER[],
    "e_resets" INTEGER[],

    CONSTRAINT "meter_day_energy_pkey" PRIMARY KEY ("device_id","day_s")
);

-- A row is about 1.7 KB (97 sums of each kind): kept whole in the table, never compressed
-- or moved out, so a read of a year of days decodes 366 plain rows.
ALTER TABLE "meter_day_energy" SET (toast_tuple_target = 8160);

-- Running day sums of the records stored before this migration, from their slot rollups, with
-- the statement ingest runs for the days it touches (store/day-energy.ts).
INSERT INTO meter_day_energy (device_id, day_s, e_uwh, e_n, e_resets)
WITH touched AS (SELECT DISTINCT device_id, day_s FROM (SELECT device_id, start_s AS day_s FROM meter_rollups WHERE span = 86400) d),
slots AS (
  SELECT t.device_id, t.day_s, (r.start_s - t.day_s) / 900 + 1 AS j, r.e_uwh, r.e_n, r.e_resets
    FROM touched t JOIN meter_rollups r
      ON r.device_id = t.device_id AND r.span = 900 AND r.start_s >= t.day_s AND r.start_s < t.day_s + 86400
)
SELECT device_id, day_s, array_agg(uwh ORDER BY j), array_agg(n ORDER BY j), array_agg(resets ORDER BY j) FROM (
  SELECT t.device_id, t.day_s, g.j,
         sum(COALESCE(s.e_uwh, 0)) OVER w AS uwh, (sum(COALESCE(s.e_n, 0)) OVER w)::int AS n, (sum(COALESCE(s.e_resets, 0)) OVER w)::int AS resets
    FROM touched t CROSS JOIN generate_series(0, 96) AS g(j)
    LEFT JOIN slots s ON s.device_id = t.device_id AND s.day_s = t.day_s AND s.j = g.j
  WINDOW w AS (PARTITION BY t.device_id, t.day_s ORDER BY g.j)
) running GROUP BY device_id, day_s
ON CONFLICT (device_id, day_s) DO UPDATE SET e_uwh = EXCLUDED.e_uwh, e_n = EXCLUDED.e_n, e_resets = EXCLUDED.e_resets;
