import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { ensureDatabase, migrate } from '@fleet/db';
import { ServiceRuntime } from '@fleet/service-kit';
import { AuthChangeListener } from './auth/change-listener';
import { Authenticator } from './auth/authenticator';
import { readGatewayConfig } from './config';
import { createApp } from './http/app';
import { RequestValidator } from './http/request-validation';
import { RouteMatcher } from './http/route-matcher';
import { IdempotencyStore } from './idempotency';
import { SlidingWindowLimiter } from './limits';
import { buildOpenApiDocument } from './openapi/build';
import { routes } from './routes/table';
import { ScopeResolver } from './scope/scope-resolver';
import { findKey } from './store/partners';
import { openGatewayDb } from './store/prisma';

import { MIGRATIONS_DIR } from './migrations';

async function main(): Promise<void> {
  const config = readGatewayConfig();
  const redis = new Redis(config.REDIS_URL, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true });
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

  const authenticator = new Authenticator((prefix) => findKey(db, prefix), () => listener.live);
  const listener = new AuthChangeListener(config.DATABASE_URL, () => authenticator.forgetAll(), logger.child({ component: 'auth-listener' }));
  await listener.start();
  runtime.onClose(() => listener.stop());

  const openApi = buildOpenApiDocument(routes, config.PUBLIC_BASE_URL ? { serverUrl: config.PUBLIC_BASE_URL } : {});
  const app = createApp(
    {
      matcher: new RouteMatcher(routes),
      validator: new RequestValidator(routes),
      authenticator,
      limiter: new SlidingWindowLimiter(redis, `${config.REDIS_KEY_PREFIX}rl:`),
      limitSettings: {
        configMutationsPerMin: config.CONFIG_MUTATIONS_PER_MIN,
        destructivePerHour: config.DESTRUCTIVE_PER_HOUR,
        deviceCeilingPerMin: config.DEVICE_COMMAND_CEILING_PER_MIN,
      },
      idempotency: new IdempotencyStore(redis, { keyPrefix: `${config.REDIS_KEY_PREFIX}idem:` }),
      scope: new ScopeResolver(bus),
      bus,
      logger: logger.child({ component: 'http' }),
    },
    {
      requireTls: config.GATEWAY_REQUIRE_TLS,
      trustedProxies: config.TRUSTED_PROXIES.split(',').map((s) => s.trim()).filter(Boolean),
      openApiDocument: () => openApi,
    },
  );

  const tls = config.TLS_CERT_FILE && config.TLS_KEY_FILE;
  const server = tls
    ? https.createServer({ cert: fs.readFileSync(config.TLS_CERT_FILE as string), key: fs.readFileSync(config.TLS_KEY_FILE as string) }, app)
    : http.createServer(app);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.GATEWAY_PORT, config.GATEWAY_HOST, () => resolve());
  });
  runtime.onClose(() => new Promise<void>((resolve) => server.close(() => resolve())), 'intake');
  const port = (server.address() as AddressInfo).port;
  runtime.ready({ port, tls: Boolean(tls) });
}

main().catch((err) => {
  console.error('gateway failed to start:', err);
  process.exit(1);
});
