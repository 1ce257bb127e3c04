-- (scripts/migration-diff.sh also proposed re-creating "readings_pkey" without its INCLUDE
-- columns, which Prisma's schema cannot express: left out, see prisma/schema.prisma, Reading.)

-- CreateTable
CREATE TABLE "pending_lights" (
    "device_id" CHAR(12) NOT NULL,
    "changed_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "pending_lights_pkey" PRIMARY KEY ("device_id")
);

-- Lights attached but not evaluated yet when this runs: should their sensors be detached before
-- the first cycle, they are still evaluated (NO_SENSORS).
INSERT INTO "pending_lights" ("device_id", "changed_at")
SELECT s."device_id", max(s."created_at") FROM "sensors" s
WHERE NOT EXISTS (SELECT 1 FROM "alert_states" a WHERE a."device_id" = s."device_id")
GROUP BY s."device_id";
