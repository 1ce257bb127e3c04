import path from 'node:path';
import { freePort, ROOT, startFleet } from '@fleet/launcher';
import { uniqueId } from '@fleet/test-kit';
import { ALERT_PERIOD_MS, TRANSFER_ACK_TIMEOUT_S, WEBHOOK_RETRY_SCHEDULE, type E2eFleet } from './fleet-env';

/** Starts every built service once for the whole end-to-end suite, on its own databases and ports. */
export default async function globalSetup(): Promise<void> {
  const run = uniqueId('e2e');
  const databasePrefix = `fleet_${run}_`;
  const redisPrefix = `${run}:`;
  const fleet = await startFleet({
    databasePrefix,
    gatewayPort: await freePort(),
    mqttPort: 0,
    dataDir: path.join(ROOT, '.fleet', 'e2e', run),
    logDir: path.join(ROOT, '.fleet', 'e2e', run, 'logs'),
    privateNats: true,
    // Alert evaluation every 1.5 s instead of 2 minutes, so the alerting flow shows in seconds.
    env: { LOG_LEVEL: process.env.E2E_LOG_LEVEL ?? 'info', REDIS_KEY_PREFIX: redisPrefix, NODE_ENV: 'test', EVALUATION_PERIOD_MS: String(ALERT_PERIOD_MS), TRANSFER_ACK_TIMEOUT_SECONDS: String(TRANSFER_ACK_TIMEOUT_S), WEBHOOK_RETRY_SCHEDULE },
  });
  (globalThis as Record<string, unknown>).__E2E_FLEET__ = fleet;
  const shared: E2eFleet = {
    gatewayUrl: fleet.gatewayUrl,
    mqttUrl: fleet.mqttUrl,
    mqttPid: fleet.mqttPid,
    mqttAdmin: fleet.mqttAdmin,
    natsUrl: fleet.natsUrl,
    databasePrefix,
    redisPrefix,
    dataDir: fleet.dataDir,
    pids: Object.fromEntries(fleet.services.flatMap((s) => (s.pid === null ? [] : [[s.name, s.pid]]))),
    healthPorts: Object.fromEntries(fleet.services.map((s) => [s.name, s.healthPort])),
  };
  process.env.E2E_FLEET = JSON.stringify(shared);
}
