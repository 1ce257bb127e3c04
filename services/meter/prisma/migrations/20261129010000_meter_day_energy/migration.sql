-- CreateTable
CREATE TABLE "meter_day_energy" (
    "device_id" TEXT NOT NULL,
    "day_s" BIGINT NOT NULL,
    "slot_ends" INTEGER[],
    "e_uwh" DECIMAL[],
    "e_n" INTEGER[],
    "e_resets" INTEGER[],

    CONSTRAINT "meter_day_energy_pkey" PRIMARY KEY ("device_id","day_s")
);

-- A row is at most about 2 KB (96 slots of four arrays): kept whole in the table, never
-- compressed or moved out, so a read of a year of days decodes 366 plain rows.
ALTER TABLE "meter_day_energy" SET (toast_tuple_target = 8160);

-- Running day sums of the records stored before this migration, from their slot rollups, with
-- the statement that recomputes a day (store/day-energy.ts).
INSERT INTO meter_day_energy (device_id, day_s, slot_ends, e_uwh, e_n, e_resets)
SELECT device_id, day_s, array_agg(slot_end ORDER BY slot_end), array_agg(uwh ORDER BY slot_end), array_agg(n ORDER BY slot_end), array_agg(resets ORDER BY slot_end)
  FROM (
    SELECT t.device_id, t.day_s, r.slot_end, sum(r.e_uwh) OVER w AS uwh, (sum(r.e_n) OVER w)::int AS n, (sum(r.e_resets) OVER w)::int AS resets
      FROM (SELECT DISTINCT device_id, day_s FROM (SELECT device_id, start_s AS day_s FROM meter_rollups WHERE span = 86400) d) t
      CROSS JOIN LATERAL (
        SELECT ((start_s - t.day_s) / 900)::int + 1 AS slot_end, e_uwh, e_n, e_resets FROM meter_rollups
         WHERE device_id = t.device_id AND span = 900 AND start_s >= t.day_s AND start_s < t.day_s + 86400 AND e_n > 0
      ) r
    WINDOW w AS (PARTITION BY t.device_id, t.day_s ORDER BY r.slot_end)
  ) running GROUP BY device_id, day_s
ON CONFLICT (device_id, day_s) DO UPDATE SET slot_ends = EXCLUDED.slot_ends, e_uwh = EXCLUDED.e_uwh, e_n = EXCLUDED.e_n, e_resets = EXCLUDED.e_resets;
