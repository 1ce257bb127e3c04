/**
 * The fleet's monitoring files against the code and against each other:
 * deploy/observability/ (prometheus.yml for compose, alerts.yml, grafana-dashboard.json) and
 * deploy/k8s/monitoring.yaml (ServiceMonitors and the PrometheusRule).
 *
 * - every metric a PromQL expression names is a family the services register (scanned from
 *   their sources), one of prom-client's default process_* / nodejs_* metrics, `up`, or EMQX's
 *   own (emqx_*);
 * - alerts.yml and the PrometheusRule carry the same rules (the same text, indented);
 * - the scrape configurations cover every service of the launcher's list, on the port the
 *   containers and the Kubernetes Services expose.
 *
 * No YAML parser is a dependency of this package, so the YAML files are read with a few
 * line-based helpers below; they rely on the files' layout (block lists, `expr:` keys).
 */
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, SERVICES } from '@fleet/launcher';

const read = (...parts: string[]) => fs.readFileSync(path.join(ROOT, ...parts), 'utf8');

// ---------------------------------------------------------------------------------------------
// Metric families the code registers
// ---------------------------------------------------------------------------------------------

type Kind = 'counter' | 'gauge' | 'histogram';

function sourceFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** name -> kind, from counter('…'), gauge('…'), histogram('…') and new Gauge/Counter/Histogram({ name: '…' }). */
function registeredFamilies(): Map<string, Kind> {
  const roots = [
    path.join(ROOT, 'packages', 'service-kit', 'src'),
    ...fs.readdirSync(path.join(ROOT, 'services')).map((name) => path.join(ROOT, 'services', name, 'src')),
  ];
  const families = new Map<string, Kind>();
  for (const file of roots.flatMap(sourceFiles)) {
    const text = fs.readFileSync(file, 'utf8');
    for (const m of text.matchAll(/\b(counter|gauge|histogram)\(\s*'([a-zA-Z_:][a-zA-Z0-9_:]*)'/g)) families.set(m[2] as string, m[1] as Kind);
    for (const m of text.matchAll(/\bnew (Counter|Gauge|Histogram)\(\{\s*name:\s*'([a-zA-Z_:][a-zA-Z0-9_:]*)'/g)) families.set(m[2] as string, (m[1] as string).toLowerCase() as Kind);
  }
  return families;
}

/** prom-client's default metrics (collectDefaultMetrics, as the service kit starts them): name -> kind. */
function promClientDefaults(): Map<string, Kind> {
  // prom-client is the service kit's dependency, not this package's: resolve it from there.
  const prom = require(require.resolve('prom-client', { paths: [path.join(ROOT, 'packages', 'service-kit')] })) as {
    Registry: new () => { getMetricsAsArray(): Array<{ name: string; type: unknown }>; clear(): void };
    collectDefaultMetrics(options: { register: unknown }): void;
  };
  const registry = new prom.Registry();
  prom.collectDefaultMetrics({ register: registry });
  const names = new Map(registry.getMetricsAsArray().map((metric) => [metric.name, String(metric.type) as Kind]));
  registry.clear();
  return names;
}

const families = registeredFamilies();
const defaults = promClientDefaults();

/** Whether a series name belongs to a family we know: `_bucket` / `_count` / `_sum` only of a histogram. */
function isKnownMetric(name: string): boolean {
  const ofFamilies = (list: Map<string, Kind>) => {
    if (list.has(name)) return true;
    const base = /^(.+)_(bucket|count|sum)$/.exec(name)?.[1];
    return base !== undefined && list.get(base) === 'histogram';
  };
  if (name === 'up') return true;
  if (/^(process|nodejs)_/.test(name)) return ofFamilies(defaults);
  // EMQX's own (/api/v5/prometheus/stats): not checkable here; names checked against EMQX 5.8.
  if (/^emqx_/.test(name)) return true;
  return ofFamilies(families);
}

// ---------------------------------------------------------------------------------------------
// PromQL: the metric names an expression uses
// ---------------------------------------------------------------------------------------------

const PROMQL_WORDS = new Set([
  'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'offset', 'bool', 'and', 'or', 'unless', 'atan2',
  'sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values', 'bottomk', 'topk', 'quantile', 'limitk', 'limit_ratio',
  'inf', 'nan',
]);

/**
 * Metric names in a PromQL expression (or a Grafana `label_values(metric{…}, label)` query): what
 * is left once strings, label matchers, ranges, label lists, Grafana variables, functions
 * (a name followed by `(`) and keywords are taken out.
 */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/#[^\n]*/g, ' ')
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/gi, ' $1 ')
    .replace(/\blabel_values\(\s*([^,()]*?)\s*,\s*\w+\s*\)/g, ' $1 ')
    .replace(/\blabel_values\(\s*\w+\s*\)/g, ' ')
    .replace(/\$\{[^}]*\}|\$\w+/g, ' ');
  const names = new Set<string>();
  for (const m of stripped.matchAll(/(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const [, word, call] = m as unknown as [string, string, string | undefined];
    if (call || PROMQL_WORDS.has(word.toLowerCase())) continue;
    names.add(word);
  }
  return [...names];
}

/** The values of every `expr:` key in a YAML text: inline, quoted, or a block scalar (| or >). */
function yamlExprs(text: string): string[] {
  const lines = text.split('\n');
  const exprs: string[] = [];
  lines.forEach((line, i) => {
    const m = /^(\s*)(?:- )?expr:\s*(.*)$/.exec(line);
    if (!m) return;
    const indent = (m[1] as string).length;
    const value = (m[2] as string).trim();
    if (/^[|>][-+]?$/.test(value)) {
      const block: string[] = [];
      for (const next of lines.slice(i + 1)) {
        if (next.trim() !== '' && next.length - next.trimStart().length <= indent) break;
        block.push(next);
      }
      // Without the block's own indentation, as a YAML parser reads it.
      const margin = Math.min(...block.filter((l) => l.trim() !== '').map((l) => l.length - l.trimStart().length));
      exprs.push(block.map((l) => l.slice(margin)).join('\n').trim());
    } else {
      exprs.push(value.replace(/^(['"])(.*)\1$/, '$2'));
    }
  });
  return exprs;
}

/** Every PromQL text of a Grafana dashboard: panel targets (rows included) and query variables. */
function dashboardExprs(dashboard: Dashboard): string[] {
  const exprs: string[] = [];
  const visit = (panels: Panel[] = []) => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) if (target.expr) exprs.push(target.expr);
      visit(panel.panels);
    }
  };
  visit(dashboard.panels);
  for (const variable of dashboard.templating?.list ?? []) {
    if (variable.type !== 'query') continue;
    const query = typeof variable.query === 'string' ? variable.query : variable.query?.query;
    if (query) exprs.push(query);
  }
  return exprs;
}

interface Target { expr?: string; refId?: string; datasource?: { type?: string; uid?: string } }
interface Panel { id?: number; type: string; title?: string; panels?: Panel[]; targets?: Target[]; datasource?: { type?: string; uid?: string }; gridPos?: { h: number; w: number; x: number; y: number } }
interface Dashboard { schemaVersion?: number; title?: string; uid?: string; panels?: Panel[]; templating?: { list?: Array<{ name: string; type: string; query?: string | { query?: string } }> } }

// ---------------------------------------------------------------------------------------------
// YAML helpers for the files at hand
// ---------------------------------------------------------------------------------------------

/** The documents of a multi-document YAML text. */
const yamlDocuments = (text: string): string[] => text.split(/^---[ \t]*$/m);

/** Lines without full-line comments and blank lines, trailing spaces trimmed. */
const significant = (text: string): string =>
  text
    .split('\n')
    .map((line) => line.replace(/\s+$/, ''))
    .filter((line) => line !== '' && !/^\s*#/.test(line))
    .join('\n');

/** alerts.yml from its `groups:` line on. */
function alertGroupsText(): string {
  const text = read('deploy', 'observability', 'alerts.yml');
  return significant(text.slice(text.search(/^groups:/m)));
}

/** monitoring.yaml's PrometheusRule: its `spec.groups` (from `  groups:` on), de-indented by two. */
function prometheusRuleGroupsText(): string {
  const doc = yamlDocuments(read('deploy', 'k8s', 'monitoring.yaml')).find((d) => /^kind: PrometheusRule$/m.test(d)) ?? '';
  const groups = doc.slice(doc.search(/^ {2}groups:/m));
  return significant(
    groups
      .split('\n')
      .map((line) => (line.startsWith('  ') ? line.slice(2) : line))
      .join('\n'),
  );
}

/** The alert rules of a `groups:` text: alert name -> the rule's text. */
function alertRules(groupsText: string): Map<string, string> {
  const rules = new Map<string, string>();
  for (const chunk of groupsText.split(/^(?=\s*- alert:)/m).slice(1)) {
    const name = /- alert:\s*(\S+)/.exec(chunk)?.[1] as string;
    rules.set(name, chunk.split(/^\s*- name:/m)[0] as string);
  }
  return rules;
}

/** One `- job_name:` block of prometheus.yml. */
function scrapeJob(name: string): string {
  const text = read('deploy', 'observability', 'prometheus.yml');
  const block = text.split(/^(?=\s*- job_name:)/m).find((chunk) => new RegExp(`^\\s*- job_name:\\s*${name}\\s*$`, 'm').test(chunk));
  return significant(block ?? '');
}

/** A ServiceMonitor document of monitoring.yaml by metadata.name. */
function serviceMonitor(name: string): string {
  const doc = yamlDocuments(read('deploy', 'k8s', 'monitoring.yaml')).find((d) => /^kind: ServiceMonitor$/m.test(d) && new RegExp(`^metadata:\\n {2}name: ${name}$`, 'm').test(d));
  return significant(doc ?? '');
}

/** The Service document of a deploy/k8s manifest, by metadata.name. */
function k8sService(file: string, name: string): string {
  return yamlDocuments(read('deploy', 'k8s', file)).find((d) => /^kind: Service$/m.test(d) && new RegExp(`^metadata:\\n {2}name: ${name}$`, 'm').test(d)) ?? '';
}

// ---------------------------------------------------------------------------------------------

describe('metric names in PromQL', () => {
  it('are found by the helper: functions, keywords, labels, matchers, ranges and variables left out', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (le, route) (rate(fleet_http_request_duration_seconds_bucket{status=~"5..", route="a(b)"}[$__rate_interval]))) > 1e3 and on (x) up offset 10m or max without (instance) (max_over_time(nodejs_eventloop_lag_p99_seconds[1m:15s])) unless vector(0)',
      ).sort(),
    ).toEqual(['fleet_http_request_duration_seconds_bucket', 'nodejs_eventloop_lag_p99_seconds', 'up']);
    expect(metricNames('label_values(process_start_time_seconds{job="fleet", service=~"$service"}, instance)')).toEqual(['process_start_time_seconds']);
    expect(yamlExprs('  - alert: A\n    expr: |\n      up\n        == 0\n    for: 1m\n  - record: b\n    expr: "sum(x)"\n')).toEqual(['up\n  == 0', 'sum(x)']);
  });

  it('the code registers the families the monitoring files are built on', () => {
    for (const [name, kind] of [
      ['fleet_http_requests_total', 'counter'],
      ['fleet_http_request_duration_seconds', 'histogram'],
      ['fleet_bus_circuit_state', 'gauge'],
      ['fleet_jetstream_consumer_messages', 'gauge'],
      ['fleet_registry_devices', 'gauge'],
    ] as const) {
      expect({ name, kind: families.get(name) }).toEqual({ name, kind });
    }
    expect(defaults.get('nodejs_eventloop_lag_p99_seconds')).toBe('gauge');
    expect(isKnownMetric('fleet_http_request_duration_seconds_bucket')).toBe(true);
    expect(isKnownMetric('fleet_http_requests_total_count')).toBe(false);
    expect(isKnownMetric('fleet_no_such_metric')).toBe(false);
    expect(isKnownMetric('nodejs_no_such_metric')).toBe(false);
  });
});

describe('deploy/observability/grafana-dashboard.json', () => {
  const dashboard = JSON.parse(read('deploy', 'observability', 'grafana-dashboard.json')) as Dashboard;
  const allPanels = (panels: Panel[] = []): Panel[] => panels.flatMap((p) => [p, ...allPanels(p.panels)]);

  it('is a Grafana dashboard whose panels query the datasource variable', () => {
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(dashboard.uid).toBeTruthy();
    const variables = dashboard.templating?.list ?? [];
    expect(variables.find((v) => v.name === 'datasource')?.type).toBe('datasource');
    const panels = allPanels(dashboard.panels);
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of panels.filter((p) => p.type !== 'row')) {
      expect({ panel: panel.title, datasource: panel.datasource?.uid }).toEqual({ panel: panel.title, datasource: '${datasource}' });
      expect({ panel: panel.title, queries: (panel.targets ?? []).filter((t) => t.expr).length > 0 }).toEqual({ panel: panel.title, queries: true });
      expect(panel.gridPos && panel.gridPos.x + panel.gridPos.w <= 24).toBe(true);
    }
  });

  it('queries only metrics the fleet exports', () => {
    const names = dashboardExprs(dashboard).flatMap(metricNames);
    expect(names.length).toBeGreaterThan(0);
    expect([...new Set(names.filter((name) => !isKnownMetric(name)))]).toEqual([]);
  });

  it('has panels for the gateway, the bus, consumers, the bridge, the meter, devices and the processes', () => {
    const used = new Set(dashboardExprs(dashboard).flatMap(metricNames).map((name) => name.replace(/_(bucket|count|sum)$/, '')));
    for (const family of [
      'fleet_http_requests_total',
      'fleet_http_request_duration_seconds',
      'fleet_http_limit_refusals_total',
      'fleet_bus_handled_total',
      'fleet_bus_handler_duration_seconds',
      'fleet_bus_requests_total',
      'fleet_bus_request_duration_seconds',
      'fleet_bus_circuit_state',
      'fleet_jetstream_consumer_messages',
      'fleet_bridge_messages_total',
      'fleet_bridge_capture_duration_seconds',
      'fleet_meter_records_total',
      'fleet_meter_records_quarantined_total',
      'fleet_registry_devices',
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_p99_seconds',
    ]) {
      expect({ family, onDashboard: used.has(family) }).toEqual({ family, onDashboard: true });
    }
  });
});

describe('alert rules: deploy/observability/alerts.yml and the PrometheusRule of deploy/k8s/monitoring.yaml', () => {
  it('are the same rules (the same text, comments and blank lines aside)', () => {
    const compose = alertGroupsText();
    expect(compose.length).toBeGreaterThan(0);
    expect(prometheusRuleGroupsText()).toBe(compose);
  });

  it('query only metrics the fleet exports', () => {
    for (const file of [read('deploy', 'observability', 'alerts.yml'), read('deploy', 'k8s', 'monitoring.yaml')]) {
      const exprs = yamlExprs(file);
      expect(exprs.length).toBeGreaterThan(0);
      expect([...new Set(exprs.flatMap(metricNames).filter((name) => !isKnownMetric(name)))]).toEqual([]);
    }
  });

  it('each have a duration, a severity, a summary and a description', () => {
    const rules = alertRules(alertGroupsText());
    expect([...rules.keys()]).toEqual(expect.arrayContaining(['FleetGatewayHighErrorRate', 'FleetGatewayHighLatency', 'FleetBusCircuitOpen', 'FleetJetStreamConsumerLag', 'FleetJetStreamRedeliveriesRising', 'FleetConnectedDevicesDropped', 'FleetTargetDown', 'FleetEventLoopLag']));
    for (const [alert, rule] of rules) {
      expect({
        alert,
        for: /^\s+for:\s*\d+[smh]\s*$/m.test(rule),
        severity: /^\s+labels:\s*\n\s+severity:\s*(critical|warning|info)\s*$/m.test(rule),
        summary: /^\s+summary:\s*\S/m.test(rule),
        description: /^\s+description:\s*\S/m.test(rule),
      }).toEqual({ alert, for: true, severity: true, summary: true, description: true });
    }
  });
});

describe('scraping', () => {
  it('prometheus.yml scrapes every service on its health port (9000 in every container) and loads alerts.yml', () => {
    expect(read('docker-compose.yml')).toMatch(/^\s+HEALTH_PORT: "9000"$/m);
    const text = read('deploy', 'observability', 'prometheus.yml');
    expect(text).toMatch(/^rule_files:\n\s+- alerts\.yml$/m);

    const job = scrapeJob('fleet');
    expect(job).toMatch(/^\s+metrics_path: \/metrics$/m);
    expect(job).toMatch(/^\s+honor_labels: true$/m);
    const targets = [...job.matchAll(/- targets: \["([a-z0-9-]+):(\d+)"\]\n\s+labels: \{ service: ([a-z0-9-]+) \}/g)].map(([, host, port, service]) => ({ host, port, service }));
    expect(targets.map((t) => t.host).sort()).toEqual([...SERVICES].sort());
    for (const t of targets) expect(t).toEqual({ host: t.host, port: '9000', service: t.host });

    const emqx = scrapeJob('emqx');
    expect(emqx).toMatch(/^\s+metrics_path: \/api\/v5\/prometheus\/stats$/m);
    expect(emqx).toMatch(/^\s+port: 18083$/m);
  });

  it('the ServiceMonitors select every service by its Service, on a port each Service exposes', () => {
    const fleet = serviceMonitor('fleet-services');
    const selected = /^\s+- key: app\.kubernetes\.io\/name\n\s+operator: In\n\s+values: \[([^\]]*)\]$/m.exec(fleet)?.[1]?.split(',').map((s) => s.trim()) ?? [];
    expect(selected.sort()).toEqual([...SERVICES].sort());
    expect(fleet).toMatch(/^\s+- port: health\n\s+path: \/metrics\n\s+interval: 15s$/m);
    expect(fleet).toMatch(/^\s+- targetLabel: job\n\s+replacement: fleet$/m);
    for (const name of SERVICES) {
      const service = k8sService(`${name}.yaml`, name);
      expect({ name, label: service.includes(`app.kubernetes.io/name: ${name}\n`), health: /\{ name: health, port: 9000, targetPort: health \}/.test(service) }).toEqual({ name, label: true, health: true });
    }

    const emqx = serviceMonitor('emqx');
    expect(emqx).toMatch(/^\s+- port: dashboard\n\s+path: \/api\/v5\/prometheus\/stats$/m);
    expect(emqx).toMatch(/^\s+- targetLabel: job\n\s+replacement: emqx$/m);
    expect(k8sService('emqx.yaml', 'emqx')).toMatch(/\{ name: dashboard, port: 18083, targetPort: dashboard \}/);
  });
});
