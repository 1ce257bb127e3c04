/** The shared fleet's alert evaluation period (config-alerting's EVALUATION_PERIOD_MS). */
export const ALERT_PERIOD_MS = 1500;

/** How long a file push waits for the device's acknowledgement in the shared fleet (system-files' TRANSFER_ACK_TIMEOUT_SECONDS). */
export const TRANSFER_ACK_TIMEOUT_S = 6;

/** Webhook retries in the shared fleet (events' WEBHOOK_RETRY_SCHEDULE): quick, so retries show in a test. */
export const WEBHOOK_RETRY_SCHEDULE = '300ms,300ms,300ms,300ms,300ms';

/** What the global setup started, handed to the test files through the environment. */
export interface E2eFleet {
  gatewayUrl: string;
  mqttUrl: string;
  /** The run's Mosquitto (with dynamic security), for outage tests. */
  mqttPid: number;
  /** The broker's admin client: may subscribe to every topic (used to watch what devices can reach). */
  mqttAdmin: { username: string; password: string };
  /** The run's own nats-server. */
  natsUrl: string;
  databasePrefix: string;
  redisPrefix: string;
  /** The run's data directory (platform files under files/). */
  dataDir: string;
  /** name -> pid of each running service */
  pids: Record<string, number>;
  /** name -> health port (/healthz, /readyz, /metrics) of each service */
  healthPorts: Record<string, number>;
}

export function e2eFleet(): E2eFleet {
  const raw = process.env.E2E_FLEET;
  if (!raw) throw new Error('the end-to-end fleet is not running (global setup did not run)');
  return JSON.parse(raw) as E2eFleet;
}
