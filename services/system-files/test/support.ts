import type { JetStreamClient } from 'nats';
import type { RequestEnvelope } from '@fleet/contracts';
import { BridgeClient } from '@fleet/bridge-client';
import { DEFAULT_TOPIC_ROOTS } from '@fleet/device-protocol';
import { RegistryClient } from '@fleet/registry-client';
import { Bus, createLogger, DurablePullConsumer, type Logger } from '@fleet/service-kit';
import { BridgeStandIn, createDeviceInStream, createMigratedTestDb, RegistryStandIn, testEnv, uniqueId, type TestDatabase } from '@fleet/test-kit';
import { readSystemConfig, systemFilter } from '../src/config';
import type { FileUrls } from '../src/domain/file-urls';
import type { SystemDeps } from '../src/handlers/deps';
import { sysTrafficProcessor } from '../src/handlers/device-in';
import { DeviceInHistory } from '../src/history/device-in-history';
import type { FileStorage } from '../src/storage/storage';
import { MIGRATIONS_DIR } from '../src/migrations';
import { openSystemDb, type SystemDb } from '../src/store/prisma';

export const logger: Logger = createLogger('system-files-test', (process.env.TEST_LOG_LEVEL ?? 'silent') as 'silent');

export type TestDb = TestDatabase<SystemDb>;

/** A migrated database of this test file's own. */
export const createTestDb = (): Promise<TestDb> => createMigratedTestDb('system_files_test_', MIGRATIONS_DIR, (url) => openSystemDb(url, 5));

/** A bus of the test's own; `subjectPrefix` isolates the subjects it serves and calls. */
export async function connectBus(service = 'system-files-test', subjectPrefix?: string): Promise<Bus> {
  return Bus.connect({ servers: testEnv.natsUrl, service, logger, requestTimeoutMs: 3000, subjectPrefix });
}

/** A DEVICE_IN-like stream of the test's own, and a message put into it as the bridge captures it. */
export { createDeviceInStream as createStream, captureDeviceMessage as captured } from '@fleet/test-kit';

/** A request envelope as the gateway sends it for a device route. */
export function envelope(deviceId: string, parts: Partial<RequestEnvelope> = {}, product: 'light' | 'meter' = 'light'): RequestEnvelope {
  return {
    request_id: uniqueId('r'),
    params: { device_id: deviceId, ...(parts.params ?? {}) },
    query: parts.query ?? {},
    device: { device_id: deviceId, product, org_node_id: 1, name: null },
    ...(parts.principal ? { principal: parts.principal } : {}),
    ...(parts.body ? { body: parts.body } : {}),
    ...(parts.idempotency_key ? { idempotency_key: parts.idempotency_key } : {}),
  };
}

/** What a test of the handlers runs on; close() ends all of it. */
export interface Testbed {
  bus: Bus;
  js: JetStreamClient;
  stream: { name: string; prefix: string };
  bridge: BridgeStandIn;
  registry: RegistryStandIn;
  deps: SystemDeps;
  /** Starts the durable consumer of the stream's sys/* traffic into `db`, as main.ts does; close() stops it. */
  startIntake(db: SystemDb, durable?: string): DurablePullConsumer;
  close(): Promise<void>;
}

/**
 * The service's collaborators on a bus and a DEVICE_IN-like stream of the test's own: stand-ins
 * for the bridge and the registry with the real clients in front of them, and the history over
 * the stream. `parts` give what the test uses itself (db, storage, urls); what it leaves out is
 * never reached by the handlers it calls. `env` adds configuration.
 */
export async function startTestbed(parts: Partial<Pick<SystemDeps, 'db' | 'storage' | 'urls'>> & { env?: Record<string, string>; timeoutMs?: number } = {}): Promise<Testbed> {
  const id = uniqueId('s');
  const bus = await connectBus(uniqueId('system-files-'), `${id}.`);
  const stream = await createDeviceInStream(bus.connection, id);
  const bridge = new BridgeStandIn(bus.connection, { prefix: stream.prefix });
  const registry = new RegistryStandIn(bus.connection, { prefix: stream.prefix });
  const timeoutMs = parts.timeoutMs ?? 2000;
  const deps: SystemDeps = {
    db: parts.db ?? ({} as SystemDb),
    bridge: new BridgeClient(bus, { timeoutMs, logger }),
    registry: new RegistryClient(bus, { timeoutMs, logger }),
    roots: DEFAULT_TOPIC_ROOTS,
    storage: parts.storage ?? ({} as FileStorage),
    urls: parts.urls ?? ({} as FileUrls),
    history: new DeviceInHistory(bus.connection, { stream: stream.name, prefix: stream.prefix }),
    config: readSystemConfig({ SUBJECT_PREFIX: stream.prefix, DEVICE_IN_STREAM: stream.name, ...parts.env }),
  };
  const intakes: DurablePullConsumer[] = [];
  return {
    bus,
    js: bus.connection.jetstream(),
    stream,
    bridge,
    registry,
    deps,
    startIntake(db, durable = 'sys') {
      const intake = new DurablePullConsumer(bus.connection, { stream: stream.name, durable, filterSubject: systemFilter(deps.config), batch: 100, process: sysTrafficProcessor(db, stream.prefix, logger), logger });
      intake.start();
      intakes.push(intake);
      return intake;
    },
    async close() {
      for (const intake of intakes) await intake.stop();
      bridge.close();
      registry.close();
      await stream.drop();
      await bus.drain();
    },
  };
}
