// `npm start`: runs the whole fleet on this machine's NATS, Postgres, Redis and MQTT broker.
const path = require('node:path');
const { startFleet } = require('./lib/fleet');

async function main() {
  const mqttUrl = process.env.MQTT_PUBLIC_URL ?? process.env.MQTT_URL ?? 'mqtt://127.0.0.1:1883';
  const logDir = path.resolve(__dirname, '..', '.fleet', 'logs');
  let fleet;
  const shutdown = async (code) => {
    if (fleet) await fleet.stop();
    process.exit(code);
  };
  fleet = await startFleet({
    logDir,
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
  console.log(`ready: gateway=${fleet.gatewayUrl} mqtt=${mqttUrl}`);
}

main().catch((err) => {
  console.error(`fleet failed to start: ${err.message}`);
  process.exit(1);
});
