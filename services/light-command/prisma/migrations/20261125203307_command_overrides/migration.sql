-- AlterTable
ALTER TABLE "command_grants" ADD COLUMN     "withdrawn" BOOLEAN NOT NULL DEFAULT false;

-- A partner now has every catalog command by default; a row overrides that. Rows written
-- before this change were grants, each the only way to give a partner a command, so a partner
-- with grants keeps exactly what it had: the commands of the catalog (as it stands at this
-- migration) it was not granted become withdrawals, and its narrowed bounds stay as they are.
-- A partner without grants had nothing it could use, and now has the whole catalog.
INSERT INTO "command_grants" ("partner_id", "command", "withdrawn")
SELECT p."partner_id", c."command", true
FROM (SELECT DISTINCT "partner_id" FROM "command_grants") AS p
CROSS JOIN (VALUES ('off'), ('solid'), ('pulse'), ('chase'), ('toggle'), ('bluchase'), ('pulse_then_solid'),
  ('chase_then_solid'), ('toggle_then_solid'), ('sound_play'), ('sound_stop'), ('contact_on'), ('contact_pulse')) AS c("command")
ON CONFLICT ("partner_id", "command") DO NOTHING;

-- A grant that narrowed nothing now says what having no row says.
DELETE FROM "command_grants" WHERE NOT "withdrawn" AND "bounds" = '{}'::jsonb;
