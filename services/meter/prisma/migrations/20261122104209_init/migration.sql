-- CreateTable
CREATE TABLE "meter_state" (
    "id" INTEGER NOT NULL DEFAULT 1,
    "epoch" TEXT NOT NULL DEFAULT replace(gen_random_uuid()::text, '-', ''),
    "arrival_hwm" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "meter_state_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "interval_records" (
    "arrival_seq" BIGSERIAL NOT NULL,
    "device_id" TEXT NOT NULL,
    "sid" TEXT NOT NULL,
    "seq" BIGINT NOT NULL,
    "start_at" TIMESTAMPTZ(3),
    "time_quality" TEXT NOT NULL,
    "duration_s" INTEGER,
    "reads_n" INTEGER,
    "reads_err" INTEGER,
    "v_avg" DOUBLE PRECISION,
    "v_min" DOUBLE PRECISION,
    "v_max" DOUBLE PRECISION,
    "i_avg" DOUBLE PRECISION,
    "i_min" DOUBLE PRECISION,
    "i_max" DOUBLE PRECISION,
    "p_avg" DOUBLE PRECISION,
    "p_min" DOUBLE PRECISION,
    "p_max" DOUBLE PRECISION,
    "f_avg" DOUBLE PRECISION,
    "f_min" DOUBLE PRECISION,
    "f_max" DOUBLE PRECISION,
    "pf_avg" DOUBLE PRECISION,
    "pf_min" DOUBLE PRECISION,
    "pf_max" DOUBLE PRECISION,
    "e_first_raw" DOUBLE PRECISION,
    "e_last_raw" DOUBLE PRECISION,
    "energy_used_wh" DOUBLE PRECISION,
    "ct_turns" INTEGER,
    "alarm_reads" INTEGER,
    "partial" BOOLEAN NOT NULL DEFAULT false,
    "energy_reset" BOOLEAN NOT NULL DEFAULT false,
    "meter_reconfigured" BOOLEAN NOT NULL DEFAULT false,
    "quarantined" BOOLEAN NOT NULL DEFAULT false,
    "quarantine_reason" TEXT,
    "received_at" TIMESTAMPTZ(3) NOT NULL,
    "cleared" BOOLEAN NOT NULL DEFAULT false,

    CONSTRAINT "interval_records_pkey" PRIMARY KEY ("arrival_seq")
);

-- CreateTable
CREATE TABLE "meter_clears" (
    "id" SERIAL NOT NULL,
    "device_id" TEXT NOT NULL,
    "cleared_at" TIMESTAMPTZ(3) NOT NULL,
    "records" INTEGER NOT NULL,

    CONSTRAINT "meter_clears_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "sample_slots" (
    "device_id" TEXT NOT NULL,
    "requested_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "sample_slots_pkey" PRIMARY KEY ("device_id")
);

-- CreateTable
CREATE TABLE "sample_requests" (
    "token" TEXT NOT NULL,
    "device_id" TEXT NOT NULL,
    "state" TEXT NOT NULL,
    "reason" TEXT,
    "requested_at" TIMESTAMPTZ(3) NOT NULL,
    "deadline_at" TIMESTAMPTZ(3) NOT NULL,
    "reading" JSONB,
    "finished_at" TIMESTAMPTZ(3),

    CONSTRAINT "sample_requests_pkey" PRIMARY KEY ("token")
);

-- CreateTable
CREATE TABLE "reset_requests" (
    "token" TEXT NOT NULL,
    "device_id" TEXT NOT NULL,
    "state" TEXT NOT NULL,
    "result" TEXT,
    "reason" TEXT,
    "requested_at" TIMESTAMPTZ(3) NOT NULL,
    "at" TIMESTAMPTZ(3),
    "unmatched_rejection" JSONB,

    CONSTRAINT "reset_requests_pkey" PRIMARY KEY ("token")
);

-- CreateIndex
CREATE INDEX "interval_records_by_start" ON "interval_records"("device_id", "start_at", "sid", "seq");

-- CreateIndex
CREATE INDEX "interval_records_by_arrival" ON "interval_records"("device_id", "arrival_seq");

-- CreateIndex
CREATE UNIQUE INDEX "interval_records_natural_key" ON "interval_records"("device_id", "sid", "seq");

-- CreateIndex
CREATE INDEX "meter_clears_device_id_cleared_at_idx" ON "meter_clears"("device_id", "cleared_at");

-- CreateIndex
CREATE INDEX "sample_requests_device_id_idx" ON "sample_requests"("device_id");

-- CreateIndex
CREATE INDEX "reset_requests_device_id_state_idx" ON "reset_requests"("device_id", "state");

-- The single state row: a fresh database gets a fresh epoch.
INSERT INTO "meter_state" ("id") VALUES (1) ON CONFLICT DO NOTHING;
