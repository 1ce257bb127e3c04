-- The root Staging / Inventory node: where devices provisioned without an organization wait.
-- It has the fixed id 1 so every replica and tool finds it without a lookup by name.
INSERT INTO "org_nodes" ("id", "parent_id", "name") VALUES (1, NULL, 'Staging / Inventory') ON CONFLICT ("id") DO NOTHING;
SELECT setval(pg_get_serial_sequence('"org_nodes"', 'id'), GREATEST((SELECT MAX("id") FROM "org_nodes"), 1));
