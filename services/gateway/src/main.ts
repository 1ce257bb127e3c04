import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { openGatewayRedis } from './store/redis';
import { ensureDatabase, migrate } from '@fleet/db';
import { applyHeapSettings, ServiceRuntime } from '@fleet/service-kit';
import { AuthChangeListener } from './auth/change-listener';
import { Authenticator } from './auth/authenticator';
import { readGatewayConfig } from './config';
import { createGatewayApp } from './gateway';
import { gatewayHandlers } from './handlers/bus-handlers';
import { answerClientErrors } from './http/app';
import { OpenStreams } from './http/stream';
import { routes } from './routes/table';
import { findKey } from './store/partners';
import { MIGRATIONS_DIR } from './migrations';
import { openGatewayDb } from './store/prisma';

async function main(): Promise<void> {
  const config = readGatewayConfig();
  applyHeapSettings({ growingPercent: config.GATEWAY_HEAP_GROWING_PERCENT, minorGcTriggerPercent: config.GATEWAY_MINOR_GC_TRIGGER_PERCENT });
  const redis = openGatewayRedis(config.REDIS_URL);
  const runtime = await ServiceRuntime.start({
    service: 'gateway',
    config,
    readiness: { redis: () => redis.status === 'ready' },
  });
  const { logger, bus } = runtime;

  await ensureDatabase(config.DATABASE_URL);
  await migrate(config.DATABASE_URL, MIGRATIONS_DIR, { logger });
  const db = openGatewayDb(config.DATABASE_URL);
  runtime.onClose(() => db.$disconnect());
  await redis.connect();
  runtime.onClose(() => void redis.quit());

  // Live event streams stay open until the partner leaves: on shutdown they are ended (the
  // partner reconnects elsewhere with Last-Event-ID) so the server can close; a partner or key
  // change ends those whose key or permission no longer admits them.
  const streams = new OpenStreams();
  const authenticator = new Authenticator((prefix) => findKey(db, prefix), () => listener.live);
  const onAuthChange = () => {
    authenticator.forgetAll();
    void streams.recheck();
  };
  const listener = new AuthChangeListener(config.DATABASE_URL, onAuthChange, logger.child({ component: 'auth-listener' }));
  await listener.start();
  runtime.onClose(() => listener.stop());

  // Other services' questions about partners (the events service: who may receive what).
  bus.serveAll(gatewayHandlers({ db }));

  const app = createGatewayApp({ config, routes, authenticator, redis, bus, logger, streams });

  const tls = config.TLS_CERT_FILE && config.TLS_KEY_FILE;
  const server = tls
    ? https.createServer({ cert: fs.readFileSync(config.TLS_CERT_FILE as string), key: fs.readFileSync(config.TLS_KEY_FILE as string) }, app)
    : http.createServer(app);
  server.keepAliveTimeout = 65_000;
  answerClientErrors(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.GATEWAY_PORT, config.GATEWAY_HOST, () => resolve());
  });
  runtime.onClose(() => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    streams.endAll();
    return closed;
  }, 'intake');
  const port = (server.address() as AddressInfo).port;
  runtime.ready({ port, tls: Boolean(tls) });
}

main().catch((err) => {
  console.error('gateway failed to start:', err);
  process.exit(1);
});
