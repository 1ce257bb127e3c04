import type { Redis } from 'ioredis';
import { RegistryClient } from '@fleet/registry-client';
import type { Bus, Logger } from '@fleet/service-kit';
import type { Authenticator } from './auth/authenticator';
import type { GatewayConfig } from './config';
import { createApp } from './http/app';
import { OpenStreams } from './http/stream';
import { RequestValidator } from './http/request-validation';
import { RouteMatcher } from './http/route-matcher';
import { IdempotencyStore } from './idempotency';
import { SlidingWindowLimiter } from './limits';
import { buildOpenApiDocument } from './openapi/build';
import type { RouteDef } from './routes/types';
import { ScopeResolver } from './scope/scope-resolver';

export interface GatewayParts {
  config: Pick<
    GatewayConfig,
    'REDIS_KEY_PREFIX' | 'GATEWAY_REQUIRE_TLS' | 'TRUSTED_PROXIES' | 'PUBLIC_BASE_URL' | 'CONFIG_MUTATIONS_PER_MIN' | 'DESTRUCTIVE_PER_HOUR' | 'DEVICE_COMMAND_CEILING_PER_MIN' | 'BUS_OUTCOME_GRACE_MS' | 'BUS_COMMIT_WAIT_MS' | 'BUS_REQUEST_TIMEOUT_MS'
  >;
  routes: RouteDef[];
  authenticator: Authenticator;
  redis: Redis;
  bus: Bus;
  logger: Logger;
  /** The live event streams, to end on shutdown; default a set of the app's own. */
  streams?: OpenStreams;
  /** The upstream head and idle timeouts of event streams; default STREAM_HEAD_TIMEOUT_MS and STREAM_IDLE_MS. */
  streamTimeouts?: { headMs: number; idleMs: number };
}

/** Wires the express app from the route table and its collaborators. */
export function createGatewayApp(parts: GatewayParts) {
  const { config, routes, redis, bus, logger } = parts;
  const openApi = buildOpenApiDocument(routes, config.PUBLIC_BASE_URL ? { serverUrl: config.PUBLIC_BASE_URL } : {});
  return createApp(
    {
      matcher: new RouteMatcher(routes),
      validator: new RequestValidator(routes),
      authenticator: parts.authenticator,
      limiter: new SlidingWindowLimiter(redis, `${config.REDIS_KEY_PREFIX}rl:`),
      limitSettings: {
        configMutationsPerMin: config.CONFIG_MUTATIONS_PER_MIN,
        destructivePerHour: config.DESTRUCTIVE_PER_HOUR,
        deviceCeilingPerMin: config.DEVICE_COMMAND_CEILING_PER_MIN,
      },
      idempotency: new IdempotencyStore(redis, { keyPrefix: `${config.REDIS_KEY_PREFIX}idem:` }),
      scope: new ScopeResolver(bus, new RegistryClient(bus, { timeoutMs: config.BUS_REQUEST_TIMEOUT_MS, logger: logger.child({ component: 'registry' }) })),
      bus,
      logger: logger.child({ component: 'http' }),
      outcomeGraceMs: config.BUS_OUTCOME_GRACE_MS,
      commitWaitMs: config.BUS_COMMIT_WAIT_MS,
      streams: parts.streams ?? new OpenStreams(),
      ...(parts.streamTimeouts ? { streamTimeouts: parts.streamTimeouts } : {}),
    },
    {
      requireTls: config.GATEWAY_REQUIRE_TLS,
      trustedProxies: config.TRUSTED_PROXIES.split(',').map((s) => s.trim()).filter(Boolean),
      openApiDocument: () => openApi,
    },
  );
}
