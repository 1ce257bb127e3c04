-- CreateTable
CREATE TABLE "command_grants" (
    "partner_id" TEXT NOT NULL,
    "command" TEXT NOT NULL,
    "bounds" JSONB NOT NULL DEFAULT '{}',
    "granted_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "command_grants_pkey" PRIMARY KEY ("partner_id","command")
);

-- CreateTable
CREATE TABLE "light_states" (
    "device_id" CHAR(12) NOT NULL,
    "channel" TEXT NOT NULL,
    "payload" TEXT NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "light_states_pkey" PRIMARY KEY ("device_id","channel")
);
