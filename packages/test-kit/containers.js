'use strict';
// The services the whole test run talks to (jest's root globalSetup / globalTeardown).
//
// By default, the machine's own: PostgreSQL, Redis, NATS with JetStream and Mosquitto at the
// URLs in the environment (POSTGRES_URL, REDIS_URL, NATS_URL, MQTT_URL), else their local
// defaults (src/index.ts, testEnv). That is the path CI takes on the development machine, which
// has those services and no Docker engine.
//
// With FLEET_TEST_CONTAINERS=1 and a Docker engine, one set-up starts the four with
// testcontainers instead and points those variables at them, for every test file and every
// process the tests start. Without an engine that is an error, never a silent fallback. The
// fleet launcher still runs its own Mosquitto (dynamic security) and, where a test asks, its
// own nats-server and RabbitMQ node from the machine's binaries.

const STARTED = Symbol.for('fleet.test-containers');

/** The four services and how each is ready; images pinned to the lines the project supports. */
function definitions({ GenericContainer, Wait }) {
  return [
    {
      env: 'POSTGRES_URL',
      container: new GenericContainer('postgres:16')
        .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
        .withExposedPorts(5432)
        .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2)),
      url: (c) => `postgresql://postgres@${c.getHost()}:${c.getMappedPort(5432)}/postgres`,
    },
    {
      env: 'REDIS_URL',
      container: new GenericContainer('redis:7').withExposedPorts(6379).withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/)),
      url: (c) => `redis://${c.getHost()}:${c.getMappedPort(6379)}`,
    },
    {
      env: 'NATS_URL',
      container: new GenericContainer('nats:2.10').withCommand(['-js']).withExposedPorts(4222).withWaitStrategy(Wait.forLogMessage(/Server is ready/)),
      url: (c) => `nats://${c.getHost()}:${c.getMappedPort(4222)}`,
    },
    {
      env: 'MQTT_URL',
      // The image's own configuration for anonymous clients on 1883.
      container: new GenericContainer('eclipse-mosquitto:2.0')
        .withCommand(['mosquitto', '-c', '/mosquitto-no-auth.conf'])
        .withExposedPorts(1883)
        .withWaitStrategy(Wait.forListeningPorts()),
      url: (c) => `mqtt://${c.getHost()}:${c.getMappedPort(1883)}`,
    },
  ];
}

async function setup() {
  if (process.env.FLEET_TEST_CONTAINERS !== '1') return;
  // Loaded only on this path: the default run never touches Docker.
  const testcontainers = require('testcontainers');
  const started = [];
  try {
    for (const d of definitions(testcontainers)) {
      const c = await d.container.start();
      started.push(c);
      process.env[d.env] = d.url(c);
    }
  } catch (err) {
    await Promise.all(started.map((c) => c.stop().catch(() => undefined)));
    throw new Error(`FLEET_TEST_CONTAINERS=1 needs a Docker engine the tests can reach (${err.message})`);
  }
  globalThis[STARTED] = started;
  const urls = ['POSTGRES_URL', 'REDIS_URL', 'NATS_URL', 'MQTT_URL'].map((name) => `${name}=${process.env[name]}`);
  process.stdout.write(`test services in containers: ${urls.join(' ')}\n`);
}

async function teardown() {
  const started = globalThis[STARTED] ?? [];
  await Promise.all(started.map((c) => c.stop().catch(() => undefined)));
}

module.exports = { setup, teardown };
