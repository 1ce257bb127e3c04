-- CreateTable
CREATE TABLE "profiles" (
    "id" SERIAL NOT NULL,
    "owner_id" TEXT,
    "name" TEXT NOT NULL,
    "description" TEXT,
    "version" INTEGER NOT NULL DEFAULT 1,
    "rules" JSONB NOT NULL,
    "default_level" TEXT NOT NULL,
    "is_default" BOOLEAN NOT NULL DEFAULT false,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "profiles_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "profile_revisions" (
    "profile_id" INTEGER NOT NULL,
    "version" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT,
    "rules" JSONB NOT NULL,
    "default_level" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "profile_revisions_pkey" PRIMARY KEY ("profile_id","version")
);

-- CreateTable
CREATE TABLE "signals" (
    "id" SERIAL NOT NULL,
    "owner_id" TEXT,
    "name" TEXT NOT NULL,
    "description" TEXT,
    "version" INTEGER NOT NULL DEFAULT 1,
    "entries" JSONB NOT NULL,
    "is_default" BOOLEAN NOT NULL DEFAULT false,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "signals_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "device_signals" (
    "device_id" CHAR(12) NOT NULL,
    "signal_id" INTEGER NOT NULL,

    CONSTRAINT "device_signals_pkey" PRIMARY KEY ("device_id")
);

-- CreateTable
CREATE TABLE "sensors" (
    "device_id" CHAR(12) NOT NULL,
    "tdl_id" TEXT NOT NULL,
    "profile_id" INTEGER,
    "label" TEXT,
    "level" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "sensors_pkey" PRIMARY KEY ("device_id","tdl_id")
);

-- CreateTable
CREATE TABLE "readings" (
    "device_id" CHAR(12) NOT NULL,
    "tdl_id" TEXT NOT NULL,
    "at" TIMESTAMPTZ(3) NOT NULL,
    "temp_c" DOUBLE PRECISION,
    "humidity" DOUBLE PRECISION,
    "breach" BOOLEAN NOT NULL,
    "received_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "readings_pkey" PRIMARY KEY ("device_id","tdl_id","at")
);

-- CreateTable
CREATE TABLE "alert_states" (
    "device_id" CHAR(12) NOT NULL,
    "level" TEXT NOT NULL,
    "changed_at" TIMESTAMPTZ(3) NOT NULL,
    "evaluated_cycle" BIGINT NOT NULL,
    "first_cycle" BIGINT NOT NULL,
    "evaluations" INTEGER NOT NULL DEFAULT 1,
    "write_needed" BOOLEAN NOT NULL DEFAULT true,
    "written_payload" TEXT,
    "written_at" TIMESTAMPTZ(3),

    CONSTRAINT "alert_states_pkey" PRIMARY KEY ("device_id")
);

-- CreateTable
CREATE TABLE "cycle_shards" (
    "cycle" BIGINT NOT NULL,
    "shard" INTEGER NOT NULL,
    "owner" TEXT,
    "lease_until" TIMESTAMPTZ(3),
    "done_at" TIMESTAMPTZ(3),

    CONSTRAINT "cycle_shards_pkey" PRIMARY KEY ("cycle","shard")
);

-- CreateIndex
CREATE UNIQUE INDEX "profiles_owner_id_name_key" ON "profiles"("owner_id", "name");

-- CreateIndex
CREATE UNIQUE INDEX "signals_owner_id_name_key" ON "signals"("owner_id", "name");

-- CreateIndex
CREATE INDEX "device_signals_signal_id_idx" ON "device_signals"("signal_id");

-- CreateIndex
CREATE INDEX "sensors_profile_id_idx" ON "sensors"("profile_id");

-- AddForeignKey
ALTER TABLE "profile_revisions" ADD CONSTRAINT "profile_revisions_profile_id_fkey" FOREIGN KEY ("profile_id") REFERENCES "profiles"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "device_signals" ADD CONSTRAINT "device_signals_signal_id_fkey" FOREIGN KEY ("signal_id") REFERENCES "signals"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "sensors" ADD CONSTRAINT "sensors_profile_id_fkey" FOREIGN KEY ("profile_id") REFERENCES "profiles"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- What exists from the first start: the Default profile and the default signal (global rows).
INSERT INTO "profiles" ("owner_id", "name", "description", "rules", "default_level", "is_default") VALUES (
  NULL, 'Default',
  'No reading yet: INSUFFICENT_DATA; newest reading older than 30 minutes: STALE_DATA; 3 breaches in a row: WARNING; latest reading a breach: ADVISORY; otherwise CLEAR.',
  '[{"all":[{"metric":"newest_age_secs","op":"is_null"}],"level":"INSUFFICENT_DATA"},{"all":[{"metric":"newest_age_secs","op":">","value":1800}],"level":"STALE_DATA"},{"all":[{"metric":"consecutive_breaches","op":">=","value":3}],"level":"WARNING"},{"all":[{"metric":"latest_breach","op":"==","value":true}],"level":"ADVISORY"}]',
  'CLEAR', true);
INSERT INTO "profile_revisions" ("profile_id", "version", "name", "description", "rules", "default_level")
  SELECT "id", "version", "name", "description", "rules", "default_level" FROM "profiles" WHERE "is_default";
INSERT INTO "signals" ("owner_id", "name", "description", "entries", "is_default") VALUES (
  NULL, 'Default', 'Solid green, solid amber, solid red; pulsing blue when there is no data.',
  '{"CLEAR":{"light":{"type":"Solid","color":{"r":0,"g":255,"b":0}}},"ADVISORY":{"light":{"type":"Solid","color":{"r":255,"g":191,"b":0}}},"WARNING":{"light":{"type":"Solid","color":{"r":255,"g":0,"b":0}}},"NO_DATA":{"light":{"type":"Pulse","color":{"r":0,"g":0,"b":255},"period_s":2}}}',
  true);
