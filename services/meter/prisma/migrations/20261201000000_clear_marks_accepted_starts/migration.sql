-- A clear's max_start_at is the newest start among the accepted (not quarantined) records it
-- cleared: a quarantined record's start is not trusted, and one far in the future made every
-- record the meter sent after the clear look older than the mark, so none was stored until the
-- meter's clock passed that start. Marks written before this migration counted quarantined
-- records too. Ingest reads only each device's latest clear, and the records present at that
-- clear are exactly the device's cleared records (every later one is stored uncleared), so the
-- latest mark is recomputed here as the clear writes it now; older marks are never read again.
UPDATE meter_clears c
   SET max_start_at = (SELECT max(r.start_at) FROM interval_records r WHERE r.device_id = c.device_id AND r.cleared AND NOT r.quarantined)
 WHERE c.id IN (SELECT DISTINCT ON (device_id) id FROM meter_clears ORDER BY device_id, cleared_at DESC, id DESC);
