/**
 * The deployment files against what the services read at start: every service of
 * docker-compose.yml and deploy/k8s/ gets an environment that its own config.ts accepts (with
 * the image's NODE_ENV=production), every variable config.ts requires is set there, health
 * checks and probes hit /healthz and /readyz on the health port, and Prometheus can reach
 * /metrics on a Service port. services.test.ts checks that the files name exactly the listed
 * services; this file checks what they give each one.
 *
 * Secrets come from the committed examples (deploy/compose.env.example,
 * deploy/k8s/secrets.example.yaml); their placeholders are replaced by a plausible value.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { presentServices, ROOT, SERVICES } from '@fleet/launcher';

type Env = Record<string, string>;
type Read = (env: Record<string, string | undefined>) => Record<string, unknown>;

const read = (...parts: string[]) => fs.readFileSync(path.join(ROOT, ...parts), 'utf8');

/** Every service listens for /healthz, /readyz and /metrics here in a container (docs/deployment.md, "Health endpoints"). */
const HEALTH_PORT = 9000;

/** Every document of a YAML file, as plain data (`<<` merge keys applied, as compose does). */
function yamlDocuments(text: string, file: string): unknown[] {
  return parseAllDocuments(text, { merge: true })
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
      return doc.toJSON() as unknown;
    })
    .filter((doc) => doc !== null && doc !== undefined);
}

/** KEY=value lines of an env file (compose's env_file, --env-file). */
function envFile(text: string): Env {
  const env: Env = {};
  for (const line of text.split('\n')) {
    const match = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$/.exec(line);
    if (!match?.[1]) continue;
    env[match[1]] = (match[2] ?? '').trim().replace(/^(['"])(.*)\1$/, '$2');
  }
  return env;
}

/** A committed placeholder of a secret ("CHANGE-ME", "REPLACE-with-..."), as a real value would look: base64 of 32 bytes (a key, a password, a URL secret). */
function plausible(value: string): string {
  return /CHANGE-ME|REPLACE/i.test(value) && !value.includes('://') ? Buffer.alloc(32, 7).toString('base64') : value;
}

/** The image's own environment: the ENV lines of the Dockerfile's runtime stage. */
function imageEnv(): Env {
  const dockerfile = read('Dockerfile');
  const runtime = dockerfile.slice(dockerfile.search(/^FROM .* AS runtime$/m));
  const env: Env = {};
  for (const [, body] of runtime.matchAll(/^ENV\s+((?:[^\n]*\\\n)*[^\n]*)$/gm)) {
    for (const pair of (body ?? '').replace(/\\\n/g, ' ').trim().split(/\s+/)) {
      const [key, ...value] = pair.split('=');
      if (key) env[key] = value.join('=');
    }
  }
  return env;
}

// ---------------------------------------------------------------------------------------
// The services' configuration readers (src/config.ts, loaded as in the image: NODE_ENV=production)
// ---------------------------------------------------------------------------------------

interface ConfigModule {
  read: Read;
  module: Record<string, unknown>;
}

const configModules = new Map<string, ConfigModule>();

function configOf(name: string): ConfigModule {
  const loaded = configModules.get(name);
  if (loaded) return loaded;
  const file = path.join(ROOT, 'services', name, 'src', 'config.ts');
  // Defaults may depend on NODE_ENV at load time (the gateway's GATEWAY_REQUIRE_TLS).
  const saved = process.env.NODE_ENV;
  let exports: Record<string, unknown> = {};
  process.env.NODE_ENV = 'production';
  try {
    jest.isolateModules(() => {
      exports = require(file);
    });
  } finally {
    process.env.NODE_ENV = saved;
  }
  // read<Service>Config; light-command's readAdminConfig is its CLI's, with a health port of 0.
  const readers = Object.keys(exports).filter((key) => /^read\w*Config$/.test(key) && key !== 'readAdminConfig');
  if (readers.length !== 1) throw new Error(`services/${name}/src/config.ts: expected one read…Config function, found ${readers.join(', ') || 'none'}`);
  const entry = { read: exports[readers[0] as string] as Read, module: exports };
  configModules.set(name, entry);
  return entry;
}

/** The variables a reader refuses to start without, from its error on an empty environment (loadConfig lists `NAME: problem; ...`). */
function requiredVariables(readConfig: Read): string[] {
  try {
    readConfig({});
    return [];
  } catch (err) {
    const message = (err as Error).message;
    const names = [...message.matchAll(/(?:^invalid configuration: |; )([A-Z][A-Z0-9_]*): /g)].map((m) => m[1] as string);
    if (names.length === 0) throw new Error(`an empty environment fails without naming a variable: ${message}`);
    return names;
  }
}

/** Reads a service's configuration from a deployment's environment; the error (or undefined) and the config. */
function readWith(name: string, env: Env): { error?: string; config?: Record<string, unknown> } {
  try {
    return { config: configOf(name).read(env) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** What a service checks at start beyond its read…Config, where the deployment decides it. */
function startProblems(name: string, config: Record<string, unknown>, replicas: number): string[] {
  const { module } = configOf(name);
  const problems: string[] = [];
  if (name === 'device-registry') {
    // main.ts: settingsKek(config); in production the key must be set and be 32 bytes of base64.
    try {
      (module.settingsKek as (c: unknown) => Buffer)(config);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  if (name === 'gateway' && config.GATEWAY_REQUIRE_TLS === true) {
    // Plain HTTP is refused unless a trusted proxy terminated TLS: without either, every request is refused.
    const tls = Boolean(config.TLS_CERT_FILE && config.TLS_KEY_FILE);
    if (!tls && !String(config.TRUSTED_PROXIES ?? '').trim()) problems.push('GATEWAY_REQUIRE_TLS without TLS_CERT_FILE/TLS_KEY_FILE or TRUSTED_PROXIES');
  }
  if (name === 'system-files' && replicas > 1 && !config.FILES_URL_SECRET) {
    // Without it each process signs with a key of its own: URLs signed by one replica fail on another.
    problems.push(`FILES_URL_SECRET unset with ${replicas} replicas`);
  }
  return problems;
}

/** The ports a service listens on with this configuration: HEALTH_PORT, GATEWAY_PORT, FILES_HTTP_PORT, BROKER_HOOK_PORT... (0: not served). */
function listeningPorts(config: Record<string, unknown>): number[] {
  return Object.entries(config)
    .filter(([key, value]) => /_PORT$/.test(key) && typeof value === 'number' && value > 0)
    .map(([, value]) => value as number)
    .sort((a, b) => a - b);
}

/** Variables the services' libraries read themselves, not config.ts. */
const LIBRARY_VARIABLES = new Set(['NODE_ENV', 'PGPASSWORD', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN']);

/** Variables a deployment sets for a service that its config.ts does not know (a typo, or a setting that went away). */
function unknownVariables(config: Record<string, unknown>, names: Iterable<string>): string[] {
  return [...names].filter((key) => !(key in config) && !LIBRARY_VARIABLES.has(key)).sort();
}

// ---------------------------------------------------------------------------------------
// docker-compose.yml
// ---------------------------------------------------------------------------------------

interface ComposeService {
  image?: string;
  build?: { context?: string; args?: Record<string, string> };
  env_file?: string | (string | { path: string })[];
  environment?: Record<string, string | number | boolean | null> | string[];
  healthcheck?: { test?: string | string[]; disable?: boolean };
  ports?: (string | number | { target: number })[];
}

/** Compose's variable substitution: $$, ${X}, ${X:-default}, ${X-default}, ${X:?message}, ${X?message}, $X. */
function interpolate(value: string, vars: Env): string {
  return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (match, braced, op, arg, bare) => {
    if (match === '$$') return '$';
    const name = (braced ?? bare) as string;
    const set = vars[name];
    if (op === ':-') return set ? set : arg;
    if (op === '-') return set ?? arg;
    if ((op === ':?' && !set) || (op === '?' && set === undefined)) throw new Error(`compose variable ${name} is required: ${arg}`);
    return set ?? '';
  });
}

const compose = yamlDocuments(read('docker-compose.yml'), 'docker-compose.yml')[0] as { services: Record<string, ComposeService> };

/** Compose variable sets the repository documents: none (the defaults), and deploy/emqx/hook.env.example (EMQX and the broker hook). */
const COMPOSE_VARIANTS: [string, Env][] = [
  ['defaults', {}],
  ['deploy/emqx/hook.env.example', envFile(read('deploy', 'emqx', 'hook.env.example'))],
];

/** The compose services built from the fleet's Dockerfile. */
const composeFleet = () => Object.keys(compose.services).filter((name) => compose.services[name]?.image?.startsWith('fleet/'));

/** A compose service's env_file variables: each file's committed `.example` (the real one holds secrets and is not in git). */
function composeEnvFiles(service: ComposeService): Env {
  const files = service.env_file === undefined ? [] : Array.isArray(service.env_file) ? service.env_file : [service.env_file];
  const env: Env = {};
  for (const entry of files) {
    const file = typeof entry === 'string' ? entry : entry.path;
    const example = path.join(ROOT, `${file}.example`);
    const text = fs.existsSync(example) ? fs.readFileSync(example, 'utf8') : read(file);
    for (const [key, value] of Object.entries(envFile(text))) env[key] = plausible(value);
  }
  return env;
}

/** A compose service block's `environment`, interpolated. */
function composeEnvironment(service: ComposeService, vars: Env): Env {
  const env: Env = {};
  const entries: [string, unknown][] = Array.isArray(service.environment)
    ? service.environment.map((line) => {
        const [key, ...value] = line.split('=');
        return [key as string, value.length > 0 ? value.join('=') : null];
      })
    : Object.entries(service.environment ?? {});
  for (const [key, value] of entries) {
    // `KEY:` with no value passes the variable through from compose's own environment.
    const resolved = value === null ? vars[key] : interpolate(String(value), vars);
    if (resolved !== undefined) env[key] = resolved;
  }
  return env;
}

/** What a compose container of the service sees: the image's ENV, then env_file, then environment. */
const composeEnv = (name: string, vars: Env): Env => {
  const service = compose.services[name] as ComposeService;
  return { ...imageEnv(), ...composeEnvFiles(service), ...composeEnvironment(service, vars) };
};

// ---------------------------------------------------------------------------------------
// deploy/k8s
// ---------------------------------------------------------------------------------------

interface Probe {
  httpGet?: { path?: string; port?: string | number };
}
interface Container {
  name: string;
  image: string;
  env?: {
    name: string;
    value?: unknown;
    valueFrom?: {
      fieldRef?: { fieldPath: string };
      secretKeyRef?: { name: string; key: string; optional?: boolean };
      configMapKeyRef?: { name: string; key: string; optional?: boolean };
    };
  }[];
  envFrom?: { prefix?: string; configMapRef?: { name: string; optional?: boolean }; secretRef?: { name: string; optional?: boolean } }[];
  ports?: { name?: string; containerPort: number }[];
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
}
interface Manifest {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  data?: Record<string, unknown>;
  stringData?: Record<string, unknown>;
  spec?: {
    replicas?: number;
    selector?: Record<string, string>;
    template?: { metadata?: { labels?: Record<string, string> }; spec: { containers: Container[] } };
    ports?: { name?: string; port: number; targetPort?: string | number }[];
    scaleTargetRef?: { kind: string; name: string };
    maxReplicas?: number;
  };
}

const k8sFile = (file: string) => yamlDocuments(read('deploy', 'k8s', file), `deploy/k8s/${file}`) as Manifest[];

/** The resources `kubectl apply -k deploy/k8s` applies. */
const kustomized = () => ((yamlDocuments(read('deploy', 'k8s', 'kustomization.yaml'), 'kustomization.yaml')[0] as { resources?: string[] }).resources ?? []).flatMap(k8sFile);

/** The ConfigMaps kustomization.yaml applies, and the Secrets secrets.example.yaml documents (created outside kustomize). */
function k8sEnvSources(): { configMaps: Map<string, Manifest>; secrets: Map<string, Manifest> } {
  const configMaps = new Map(kustomized().filter((m) => m.kind === 'ConfigMap').map((m) => [m.metadata.name, m] as const));
  const secrets = new Map([...kustomized(), ...k8sFile('secrets.example.yaml')].filter((m) => m.kind === 'Secret').map((m) => [m.metadata.name, m] as const));
  return { configMaps, secrets };
}

/** The variables of a ConfigMap or Secret (a Secret's `data` is base64). */
function sourceData(source: Manifest): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(source.data ?? {})) data[key] = source.kind === 'Secret' ? Buffer.from(String(value), 'base64').toString('utf8') : value;
  return { ...data, ...(source.stringData ?? {}) };
}

interface Workload {
  workload: Manifest;
  container: Container;
  manifests: Manifest[];
}

/**
 * The service's workloads (Deployments or StatefulSets running image fleet/<name>) and the rest of its manifest: one
 * per service, except meter's two Deployments of one image (meter-ingest and meter-query, by METER_ROLE).
 */
function k8sWorkloads(name: string): Workload[] {
  const manifests = k8sFile(`${name}.yaml`);
  const workloads = manifests.filter((m) => (m.kind === 'Deployment' || m.kind === 'StatefulSet') && m.spec?.template?.spec.containers.some((c) => c.image.startsWith(`fleet/${name}`)));
  if (workloads.length === 0) throw new Error(`deploy/k8s/${name}.yaml: no Deployment or StatefulSet of fleet/${name}`);
  return workloads.map((workload) => ({ workload, container: workload.spec?.template?.spec.containers.find((c) => c.image.startsWith(`fleet/${name}`)) as Container, manifests }));
}

/** The workload of a service that runs as one. */
function k8sWorkload(name: string): Workload {
  const workloads = k8sWorkloads(name);
  if (workloads.length !== 1) throw new Error(`deploy/k8s/${name}.yaml: expected one Deployment or StatefulSet of fleet/${name}, found ${workloads.length}`);
  return workloads[0] as Workload;
}

/** What the service's container (of that workload) sees: the image's ENV, then envFrom in order, then env; with the problems met resolving it. */
function k8sEnv(name: string, { container }: Workload = k8sWorkload(name)): { env: Env; problems: string[] } {
  const { configMaps, secrets } = k8sEnvSources();
  const env: Env = { ...imageEnv() };
  const problems: string[] = [];
  const put = (key: string, value: unknown, where: string) => {
    if (typeof value !== 'string') problems.push(`${where}: ${key} is ${JSON.stringify(value)}, not a string (quote it)`);
    env[key] = plausible(String(value));
  };
  for (const from of container.envFrom ?? []) {
    const ref = from.configMapRef ?? from.secretRef;
    const sources = from.configMapRef ? configMaps : secrets;
    const kind = from.configMapRef ? 'ConfigMap' : 'Secret';
    if (!ref) continue;
    const source = sources.get(ref.name);
    if (!source) {
      if (!ref.optional) problems.push(`envFrom: ${kind} ${ref.name} is not defined`);
      continue;
    }
    for (const [key, value] of Object.entries(sourceData(source))) put(`${from.prefix ?? ''}${key}`, value, `${kind} ${ref.name}`);
  }
  for (const variable of container.env ?? []) {
    const from = variable.valueFrom;
    if (!from) {
      put(variable.name, variable.value ?? '', 'env');
    } else if (from.fieldRef) {
      env[variable.name] = from.fieldRef.fieldPath === 'metadata.name' ? `${name}-0` : 'downward-api';
    } else {
      const ref = from.secretKeyRef ?? from.configMapKeyRef;
      const source = ref && (from.secretKeyRef ? secrets : configMaps).get(ref.name);
      const value = ref && source ? sourceData(source)[ref.key] : undefined;
      if (value !== undefined) put(variable.name, value, `env ${variable.name}`);
      else if (!ref?.optional) problems.push(`env ${variable.name}: ${ref?.name}/${ref?.key} is not defined`);
    }
  }
  return { env, problems };
}

/** How many replicas the workload may run: its HorizontalPodAutoscaler's maximum, else spec.replicas (1 when unset). */
function k8sReplicas({ workload, manifests }: Workload): number {
  const hpa = manifests.find((m) => m.kind === 'HorizontalPodAutoscaler' && m.spec?.scaleTargetRef?.name === workload.metadata.name);
  return hpa?.spec?.maxReplicas ?? workload.spec?.replicas ?? 1;
}

// ---------------------------------------------------------------------------------------


/** device-registry's hook and mqtt-bridge, given the env each gets: same broker mode, roots and URL, and in hook mode the bridge's login is the hook's platform identity. */
function expectBrokerPairing(registryEnv: Env, bridgeEnv: Env): void {
  const registry = readWith('device-registry', registryEnv).config ?? {};
  const bridge = readWith('mqtt-bridge', bridgeEnv).config ?? {};
  const identity = (configOf('device-registry').module.platformIdentity as (c: unknown) => { username: string; password: string })(registry);
  expect({ mode: registry.BROKER_CREDENTIALS, light: registry.LIGHT_TOPIC_ROOT, meter: registry.METER_TOPIC_ROOT, url: registry.MQTT_URL }).toEqual({
    mode: bridge.BROKER_AUTH,
    light: bridge.LIGHT_TOPIC_ROOT,
    meter: bridge.METER_TOPIC_ROOT,
    url: bridge.MQTT_URL,
  });
  if (registry.BROKER_CREDENTIALS === 'hook') expect(identity).toEqual({ username: bridge.MQTT_ADMIN_USERNAME, password: bridge.MQTT_ADMIN_PASSWORD });
}
describe('deployment files against the services', () => {
  it('deploy only services whose code exists (each with a config.ts and one read…Config)', () => {
    const present = presentServices();
    const k8sServices = fs
      .readdirSync(path.join(ROOT, 'deploy', 'k8s'))
      .filter((file) => file.endsWith('.yaml'))
      .flatMap((file) => k8sFile(file))
      .filter((m) => m.kind === 'Deployment' || m.kind === 'StatefulSet')
      .flatMap((m) => m.spec?.template?.spec.containers ?? [])
      .map((c) => /^fleet\/([a-z-]+)/.exec(c.image)?.[1])
      .filter((name): name is string => Boolean(name));
    expect(composeFleet().filter((name) => !present.includes(name))).toEqual([]);
    expect(k8sServices.filter((name) => !present.includes(name))).toEqual([]);
    for (const name of present) expect({ name, read: typeof configOf(name).read }).toEqual({ name, read: 'function' });
  });

  it('the images run every service with HEALTH_PORT 9000 and a HEALTHCHECK on its /healthz', () => {
    const dockerfile = read('Dockerfile');
    expect(imageEnv().HEALTH_PORT).toBe(String(HEALTH_PORT));
    expect(dockerfile).toMatch(new RegExp(`^EXPOSE ${HEALTH_PORT}$`, 'm'));
    const healthcheck = /^HEALTHCHECK (?:[^\n]*\\\n)*[^\n]*/m.exec(dockerfile)?.[0] ?? '';
    expect(healthcheck).toMatch(/process\.env\.HEALTH_PORT/);
    expect(healthcheck).toMatch(/\/healthz/);
  });
});

describe.each(COMPOSE_VARIANTS)('docker-compose.yml (compose variables: %s)', (_variant, vars) => {
  it.each(SERVICES)('%s: its config.ts accepts the environment, which sets every variable it requires; published ports reach its listeners', (name) => {
    const env = composeEnv(name, vars);
    const required = requiredVariables(configOf(name).read);
    expect({ name, unset: required.filter((key) => !env[key]) }).toEqual({ name, unset: [] });
    const { error, config } = readWith(name, env);
    expect({ name, error }).toEqual({ name, error: undefined });
    // Compose runs one container per service.
    expect({ name, problems: startProblems(name, config ?? {}, 1) }).toEqual({ name, problems: [] });
    const own = Object.keys(composeEnvironment(compose.services[name] as ComposeService, vars));
    expect({ name, unknown: unknownVariables(config ?? {}, own) }).toEqual({ name, unknown: [] });
    // Each published port reaches a port the service listens on (container side of "host:container").
    const published = (compose.services[name]?.ports ?? []).map((port) =>
      typeof port === 'object' ? port.target : Number(/(\d+)(?:\/\w+)?$/.exec(interpolate(String(port), vars))?.[1]),
    );
    const listening = listeningPorts(config ?? {});
    expect({ name, notListening: published.filter((port) => !listening.includes(port)) }).toEqual({ name, notListening: [] });
  });

  it.each(SERVICES)('%s: is built from the Dockerfile and health-checked on /healthz at HEALTH_PORT', (name) => {
    const service = compose.services[name] as ComposeService;
    expect({ name, build: service.build?.args?.SERVICE, context: service.build?.context }).toEqual({ name, build: name, context: '.' });
    expect({ name, HEALTH_PORT: composeEnv(name, vars).HEALTH_PORT }).toEqual({ name, HEALTH_PORT: String(HEALTH_PORT) });
    // Its own healthcheck, or the image's HEALTHCHECK (which reads HEALTH_PORT): never turned off.
    const test = service.healthcheck?.test;
    expect({ name, disabled: service.healthcheck?.disable === true || (Array.isArray(test) && test[0] === 'NONE') }).toEqual({ name, disabled: false });
    if (test !== undefined) {
      const command = Array.isArray(test) ? test.join(' ') : test;
      expect({ name, healthz: /\/healthz/.test(command) && (command.includes(String(HEALTH_PORT)) || command.includes('HEALTH_PORT')) }).toEqual({ name, healthz: true });
    }
  });

  it('device-registry hook knows the identity mqtt-bridge logs in with, in the same broker mode, with the same topic roots', () => {
    expectBrokerPairing(composeEnv('device-registry', vars), composeEnv('mqtt-bridge', vars));
  });
});

describe('deploy/k8s', () => {
  it('runs one workload per service, except meter: two Deployments of its image, meter-ingest (METER_ROLE=ingest) and meter-query (METER_ROLE=query)', () => {
    for (const name of SERVICES.filter((s) => s !== 'meter')) expect({ name, workloads: k8sWorkloads(name).length }).toEqual({ name, workloads: 1 });
    const meter = k8sWorkloads('meter').map((w) => [w.workload.kind, w.workload.metadata.name, k8sEnv('meter', w).env.METER_ROLE]);
    expect(meter).toEqual([
      ['Deployment', 'meter-ingest', 'ingest'],
      ['Deployment', 'meter-query', 'query'],
    ]);
  });

  it.each(SERVICES)('%s: its config.ts accepts the environment (envFrom ConfigMaps and Secrets, env), which sets every variable it requires; the container declares the ports it listens on', (service) => {
    for (const w of k8sWorkloads(service)) {
      // The workload's name in each expectation (meter has two); the service's own for all the others.
      const name = w.workload.metadata.name;
      const { env, problems } = k8sEnv(service, w);
      expect({ name, problems }).toEqual({ name, problems: [] });
      const required = requiredVariables(configOf(service).read);
      expect({ name, unset: required.filter((key) => !env[key]) }).toEqual({ name, unset: [] });
      expect({ name, HEALTH_PORT: env.HEALTH_PORT }).toEqual({ name, HEALTH_PORT: String(HEALTH_PORT) });
      const { error, config } = readWith(service, env);
      expect({ name, error }).toEqual({ name, error: undefined });
      expect({ name, problems: startProblems(service, config ?? {}, k8sReplicas(w)) }).toEqual({ name, problems: [] });
      expect({ name, unknown: unknownVariables(config ?? {}, Object.keys(env)) }).toEqual({ name, unknown: [] });
      // The container declares exactly the ports the service listens on (what the probes and Services name).
      const declared = (w.container.ports ?? []).map((p) => p.containerPort).sort((a, b) => a - b);
      expect({ name, ports: declared }).toEqual({ name, ports: listeningPorts(config ?? {}) });
    }
  });

  it.each(SERVICES)('%s: probes /healthz (startup, liveness) and /readyz (readiness) on the health port, which its Service exposes for /metrics', (service) => {
    for (const { workload, container, manifests } of k8sWorkloads(service)) {
      const name = workload.metadata.name;
      const ports = container.ports ?? [];
      const health = ports.find((p) => p.containerPort === HEALTH_PORT);
      expect({ name, healthPort: health !== undefined }).toEqual({ name, healthPort: true });
      const portOf = (port: string | number | undefined) => (typeof port === 'number' ? port : ports.find((p) => p.name === port)?.containerPort);
      const probe = (p: Probe | undefined) => ({ path: p?.httpGet?.path, port: portOf(p?.httpGet?.port) });
      expect({ name, startup: probe(container.startupProbe), liveness: probe(container.livenessProbe), readiness: probe(container.readinessProbe) }).toEqual({
        name,
        startup: { path: '/healthz', port: HEALTH_PORT },
        liveness: { path: '/healthz', port: HEALTH_PORT },
        readiness: { path: '/readyz', port: HEALTH_PORT },
      });
      // A Service selecting these pods, labelled with the service's name, whose port `health` reaches the health port: what
      // Prometheus scrapes for /metrics (the ServiceMonitor selects Services by app.kubernetes.io/name and scrapes port `health`).
      // meter's one Service selects the pods of both its Deployments.
      const labels = workload.spec?.template?.metadata?.labels ?? {};
      const services = manifests.filter((m) => m.kind === 'Service' && Object.entries(m.spec?.selector ?? {}).every(([key, value]) => labels[key] === value) && Object.keys(m.spec?.selector ?? {}).length > 0);
      const scrape = services.flatMap((s) => s.spec?.ports ?? []).find((p) => p.name === 'health');
      expect({ name, service: services.map((s) => [s.metadata.name, s.metadata.labels?.['app.kubernetes.io/name']]), health: portOf(scrape?.targetPort ?? scrape?.port) }).toEqual({
        name,
        service: [[service, service]],
        health: HEALTH_PORT,
      });
    }
  });

  it('device-registry hook knows the identity mqtt-bridge logs in with, in the same broker mode, with the same topic roots', () => {
    expectBrokerPairing(k8sEnv('device-registry').env, k8sEnv('mqtt-bridge').env);
  });
});
