-- AlterTable
ALTER TABLE "devices" ADD COLUMN     "broker_password_hash" TEXT;
