-- CreateTable
CREATE TABLE "org_nodes" (
    "id" SERIAL NOT NULL,
    "parent_id" INTEGER,
    "name" TEXT NOT NULL,

    CONSTRAINT "org_nodes_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "devices" (
    "device_id" CHAR(12) NOT NULL,
    "product" TEXT NOT NULL,
    "name" TEXT,
    "org_node_id" INTEGER NOT NULL,
    "automation_enabled" BOOLEAN NOT NULL DEFAULT true,
    "credential_source" TEXT NOT NULL,
    "settings_key_ciphertext" TEXT,
    "status" TEXT NOT NULL DEFAULT 'disconnected',
    "status_changed_at" TIMESTAMPTZ(3),
    "last_seen_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "devices_pkey" PRIMARY KEY ("device_id")
);

-- CreateTable
CREATE TABLE "telemetry" (
    "id" BIGSERIAL NOT NULL,
    "device_id" CHAR(12) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "topic" TEXT NOT NULL,
    "payload" TEXT NOT NULL,

    CONSTRAINT "telemetry_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "org_nodes_parent_id_idx" ON "org_nodes"("parent_id");

-- CreateIndex
CREATE INDEX "org_nodes_name_idx" ON "org_nodes"("name");

-- CreateIndex
CREATE INDEX "devices_org_node_id_idx" ON "devices"("org_node_id");

-- CreateIndex
CREATE INDEX "devices_status_last_seen_at_idx" ON "devices"("status", "last_seen_at");

-- CreateIndex
CREATE INDEX "telemetry_device_id_created_at_idx" ON "telemetry"("device_id", "created_at");

-- CreateIndex
CREATE INDEX "telemetry_created_at_idx" ON "telemetry"("created_at");

-- CreateIndex
CREATE UNIQUE INDEX "telemetry_device_id_topic_created_at_key" ON "telemetry"("device_id", "topic", "created_at");

-- AddForeignKey
ALTER TABLE "org_nodes" ADD CONSTRAINT "org_nodes_parent_id_fkey" FOREIGN KEY ("parent_id") REFERENCES "org_nodes"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "devices" ADD CONSTRAINT "devices_org_node_id_fkey" FOREIGN KEY ("org_node_id") REFERENCES "org_nodes"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "telemetry" ADD CONSTRAINT "telemetry_device_id_fkey" FOREIGN KEY ("device_id") REFERENCES "devices"("device_id") ON DELETE CASCADE ON UPDATE CASCADE;
