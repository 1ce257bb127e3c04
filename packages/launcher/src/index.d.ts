// Types of the launcher's plain-JS modules (see each module for the details of behaviour).

/** The repository's root directory. */
export const ROOT: string;

export interface ServiceEntry {
  /** The folder under services/, the image, the compose service and the k8s manifest. */
  name: string;
  /** Whether it owns a Postgres database (DATABASE_URL). */
  database: boolean;
  /** Staff CLI entities it owns (`npm run -s admin -- <entity> ...`). */
  admin: string[];
}

/** The one list of the fleet's services, in start order. */
export const SERVICE_LIST: readonly ServiceEntry[];
/** Every service name, in start order. */
export const SERVICES: readonly string[];
/** The listed services whose code exists in this checkout. */
export function presentServices(): string[];
/** The listed services that are built, in start order. */
export function builtServices(): string[];
/** The service that owns a staff CLI entity, or undefined. */
export function adminOwner(entity: string): string | undefined;
/** Every staff CLI entity. */
export function adminEntities(): string[];

/** A free TCP port on 127.0.0.1, below the kernel's ephemeral range, never the same twice per process. */
export function freePort(): Promise<number>;
/** Whether a process with this pid exists. */
export function isRunning(pid: number | null | undefined): boolean;
/** Whether something accepts connections on 127.0.0.1:<port>. */
export function accepting(port: number): Promise<boolean>;

export interface PrivateNatsServer {
  url: string;
  port: number;
  pid: number;
  storeDir: string;
  stop(): Promise<void>;
}

/** A nats-server of its own with JetStream (store in storeDir, or a temp dir removed on stop). */
export function startNatsServer(options?: {
  port?: number;
  storeDir?: string;
  onExit?: (code: number | null, signal: NodeJS.Signals | null) => void;
  stopGraceMs?: number;
  ownProcessGroup?: boolean;
}): Promise<PrivateNatsServer>;

export interface DynsecBroker {
  url: string;
  port: number;
  adminUsername: string;
  adminPassword: string;
  pid: number;
  dataDir: string;
  logFile: string;
  stop(): Promise<void>;
}

/** A Mosquitto with the dynamic-security plugin, its config, plugin file and persistence in dataDir. */
export function startDynsecBroker(options: {
  port?: number;
  dataDir: string;
  adminUsername?: string;
  adminPassword?: string;
  readyTimeoutMs?: number;
  ownProcessGroup?: boolean;
}): Promise<DynsecBroker>;
/** The broker admin password kept in dataDir (mode 0600), generated on first use. */
export function loadOrCreateAdminPassword(dataDir: string): string;

export interface RabbitMqttBroker {
  /** mqtt://127.0.0.1:<port> (MQTT 3.1.1 only: RabbitMQ 3.10 has no MQTT 5). */
  url: string;
  port: number;
  /** The private node's name, e.g. fleet-1a2b3c4d5e@localhost (kept in dataDir/node-name). */
  nodeName: string;
  dataDir: string;
  /** The node's log (<nodeName>.log) and the start script's output (startup.log). */
  logDir: string;
  logFile: string;
  /** The Erlang VM's pid while the node runs; it changes on restart, undefined once stopped. */
  readonly pid: number | undefined;
  /** Runs `rabbitmqctl -n <nodeName> ...args` with the node's cookie; rejects when it fails. */
  rabbitmqctl(...args: string[]): Promise<string>;
  /** Stops the node cleanly (SIGTERM, SIGKILL after 30 s) and waits until its VM is gone. */
  stop(): Promise<void>;
  /** Stops the node, then starts it again on the same port, name and data (mnesia kept). */
  restart(): Promise<void>;
}

/**
 * A private RabbitMQ 3.10 node (not the system one) whose only listener is MQTT on
 * 127.0.0.1:<mqttPort> (a free port when 0 or missing), its files in dataDir. With hookBaseUrl,
 * logins and permissions are asked of <hookBaseUrl>/mqtt/rabbitmq/{user,vhost,resource,topic}
 * (rabbitmq_auth_backend_http: form-encoded POSTs answered `allow` or `deny`); without it, MQTT
 * clients connect anonymously (the benchmarks' baseline). Resolves once an MQTT CONNECT is answered.
 */
export function startRabbitMqttBroker(options: {
  dataDir: string;
  mqttPort?: number;
  hookBaseUrl?: string;
  readyTimeoutMs?: number;
}): Promise<RabbitMqttBroker>;

export interface Backoff {
  initialMs: number;
  factor: number;
  maxMs: number;
  resetAfterMs: number;
}
export const DEFAULT_BACKOFF: Backoff;
/** The delay before restart number `attempt` (1, 2, ...) of a process that keeps failing. */
export function restartDelay(attempt: number, backoff?: Partial<Backoff>): number;

export interface FleetEvent {
  type: string;
  message: string;
  time?: string;
  name?: string;
  replica?: number;
  instance?: string;
  pid?: number;
  healthPort?: number;
  attempt?: number;
  delayMs?: number;
  code?: number | null;
  signal?: string | null;
  reason?: string;
  url?: string;
}

export interface ServiceView {
  name: string;
  replica: number;
  instance: string;
  healthPort: number;
  logFile: string;
  readonly pid: number | null;
  readonly state: string;
  readonly restarts: number;
}

export interface FleetOptions {
  env?: Record<string, string | undefined>;
  databasePrefix?: string;
  gatewayPort?: number;
  logDir?: string;
  readyTimeoutMs?: number;
  services?: string[];
  replicas?: Record<string, number>;
  mqttPort?: number;
  dataDir?: string;
  mqttDataDir?: string;
  mqttAdminUsername?: string;
  privateNats?: boolean;
  natsPort?: number;
  supervise?: boolean;
  backoff?: Partial<Backoff>;
  stopGraceMs?: number;
  /** Mosquitto and the private nats-server out of the caller's process group (see fleet.js). */
  brokersOwnProcessGroup?: boolean;
  stateFile?: string | null;
  onEvent?: (event: FleetEvent) => void;
  onUnexpectedExit?: (name: string, code: number | null, signal: string | null, replica: number) => void;
  signal?: AbortSignal;
}

export interface Fleet {
  gatewayUrl: string;
  mqttUrl: string;
  readonly mqttPid: number;
  readonly natsPid: number | null;
  natsUrl: string;
  mqttAdmin: { username: string; password: string };
  dataDir: string;
  stateFile: string | null;
  supervise: boolean;
  services: ServiceView[];
  pidOf(name: string, replica?: number): number | null;
  kill(name: string, options?: { replica?: number; signal?: NodeJS.Signals; timeoutMs?: number }): Promise<{ pid: number; code: number | null; signal: string | null }>;
  waitReady(name: string, options?: { replica?: number; timeoutMs?: number }): Promise<{ pid: number; healthPort: number }>;
  /** Stops a replica and keeps it stopped (no supervised restart) until startService. */
  stopService(name: string, options?: { replica?: number }): Promise<void>;
  /** Starts a replica that stopService stopped; resolves once it is ready. */
  startService(name: string, options?: { replica?: number; timeoutMs?: number }): Promise<{ pid: number; healthPort: number }>;
  restartBroker(): Promise<{ pid: number; url: string }>;
  onEvent(listener: (event: FleetEvent) => void): () => void;
  stop(): Promise<void>;
}

/** Starts the fleet's services (and its Mosquitto, optionally its nats-server); see fleet.js. */
export function startFleet(options?: FleetOptions): Promise<Fleet>;
