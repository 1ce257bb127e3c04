// @fleet/launcher: runs the fleet's processes on this machine, for `npm start`, the staff CLI,
// the end-to-end tests and the benchmarks. Plain CommonJS (no build step), so the scripts
// that start everything run before anything is compiled; types are in index.d.ts.
const { startFleet, restartDelay, DEFAULT_BACKOFF } = require('./fleet');
const { freePort, accepting } = require('./ports');
const { isRunning } = require('./child');
const { startNatsServer } = require('./nats');
const { startDynsecBroker, loadOrCreateAdminPassword } = require('./mosquitto');
const { startRabbitMqttBroker } = require('./rabbitmq');
const services = require('./services');

module.exports = {
  startFleet,
  restartDelay,
  DEFAULT_BACKOFF,
  freePort,
  isRunning,
  accepting,
  startNatsServer,
  startDynsecBroker,
  loadOrCreateAdminPassword,
  startRabbitMqttBroker,
  ...services,
};
