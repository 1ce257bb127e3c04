// `npm start`: runs the whole fleet on this machine's NATS, Postgres and Redis, with its own
// Mosquitto (dynamic-security plugin) on MQTT_PORT (default 1884; data in .fleet/mosquitto).
const path = require('node:path');
const { startFleet } = require('./lib/fleet');

async function main() {
  const logDir = path.resolve(__dirname, '..', '.fleet', 'logs');
  let fleet;
  const shutdown = async (code) => {
    if (fleet) await fleet.stop();
    process.exit(code);
  };
  fleet = await startFleet({
    logDir,
    mqttPort: Number(process.env.MQTT_PORT ?? 1884),
    mqttDataDir: path.resolve(__dirname, '..', '.fleet', 'mosquitto'),
    onUnexpectedExit: (name, code, signal) => {
      console.error(`${name} exited unexpectedly (${signal ?? `code ${code}`}); stopping the fleet. Logs: ${logDir}`);
      void shutdown(1);
    },
  });
  process.once('SIGINT', () => void shutdown(0));
  process.once('SIGTERM', () => void shutdown(0));
  const names = fleet.services.map((s) => s.name).join(', ');
  console.log(`services: ${names} (logs in ${logDir})`);
  console.log('get a key: npm run -s admin -- partner create --name "Acme" --permissions all  then  npm run -s admin -- key issue --partner <id>');
  console.log(`ready: gateway=${fleet.gatewayUrl} mqtt=${process.env.MQTT_PUBLIC_URL ?? fleet.mqttUrl}`);
}

main().catch((err) => {
  console.error(`fleet failed to start: ${err.message}`);
  process.exit(1);
});
