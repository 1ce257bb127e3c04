import fs from 'node:fs';
import path from 'node:path';
import * as launcher from '@fleet/launcher';
import type { Fleet, FleetOptions } from '@fleet/launcher';
import { dropDatabasesWithPrefix, uniqueId } from '@fleet/test-kit';
import { adminAt, apiAt, partnerWithKey, type Answer, type ApiOptions } from './api';
import { deleteRedisKeysWithPrefix } from './redis-keys';

export interface OwnFleetOptions {
  services: string[];
  replicas?: Record<string, number>;
  env?: Record<string, string>;
}

/**
 * A fleet of a test file's own, for tests that stop, pause or kill its parts (the shared
 * end-to-end fleet must not be disturbed): private nats-server, its own Mosquitto, databases
 * and ports, supervised like `npm start`. restart() stops the whole fleet and starts it again
 * on the same ports, databases, broker data and JetStream store.
 */
export class OwnFleet {
  handle!: Fleet;
  readonly databasePrefix: string;
  readonly dataDir: string;
  readonly redisPrefix: string;
  private startOptions!: FleetOptions;

  private constructor(private readonly options: OwnFleetOptions) {
    const run = uniqueId('own');
    this.databasePrefix = `fleet_${run}_`;
    this.dataDir = path.join(launcher.ROOT, '.fleet', 'e2e', run);
    this.redisPrefix = `${run}:`;
  }

  static async start(options: OwnFleetOptions): Promise<OwnFleet> {
    const fleet = new OwnFleet(options);
    fleet.startOptions = {
      services: options.services,
      replicas: options.replicas ?? {},
      supervise: true,
      databasePrefix: fleet.databasePrefix,
      gatewayPort: await launcher.freePort(),
      mqttPort: await launcher.freePort(),
      dataDir: fleet.dataDir,
      logDir: path.join(fleet.dataDir, 'logs'),
      privateNats: true,
      env: { LOG_LEVEL: process.env.E2E_LOG_LEVEL ?? 'info', REDIS_KEY_PREFIX: fleet.redisPrefix, NODE_ENV: 'test', ...options.env },
    };
    fleet.handle = await launcher.startFleet(fleet.startOptions);
    return fleet;
  }

  get gatewayUrl(): string {
    return this.handle.gatewayUrl;
  }

  get mqttUrl(): string {
    return this.handle.mqttUrl;
  }

  api(method: string, pathAndQuery: string, options: ApiOptions = {}): Promise<Answer> {
    return apiAt(this.handle.gatewayUrl, method, pathAndQuery, options);
  }

  admin(...argv: string[]): Promise<Record<string, unknown>> {
    return adminAt(this.databasePrefix, ...argv);
  }

  partnerWithKey(flags: string[] = []): ReturnType<typeof partnerWithKey> {
    return partnerWithKey(flags, this.databasePrefix);
  }

  /** Stops every part and starts the fleet again on the same ports and data. */
  async restart(): Promise<void> {
    await this.handle.stop();
    this.handle = await launcher.startFleet(this.startOptions);
  }

  /** Stops the fleet and removes its databases and data directory (kept, logs included, when E2E_KEEP_LOGS is set). */
  async destroy(): Promise<void> {
    await this.handle?.stop();
    await dropDatabasesWithPrefix(this.databasePrefix);
    await deleteRedisKeysWithPrefix(this.redisPrefix);
    if (!process.env.E2E_KEEP_LOGS) fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}
