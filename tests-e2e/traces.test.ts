import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { SimulatedLight } from '@fleet/device-sim';
import { randomDeviceId, waitFor } from '@fleet/test-kit';
import { OwnFleet } from './support/own-fleet';

/**
 * One trace across the fleet: a partner's `traceparent` on a light command is continued by the
 * gateway, carried over the bus to light-command and mqtt-bridge, and every process exports its
 * spans over OTLP/HTTP to the collector configured with OTEL_EXPORTER_OTLP_ENDPOINT. The
 * collector here is an HTTP server that keeps what it is sent (no collector runs on this
 * machine); the fleet's own processes and exporters are real.
 */

jest.setTimeout(120_000);

interface Span {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
}

const SECRET = 'Traces-E2E-Sec!!';
const spans: Span[] = [];
let collector: http.Server;
let fleet: OwnFleet;
let light: SimulatedLight | undefined;

/** OTLP/JSON: resourceSpans[].resource.attributes (service.name), scopeSpans[].spans[]. */
function keep(body: string): void {
  const doc = JSON.parse(body) as {
    resourceSpans?: Array<{ resource?: { attributes?: Array<{ key: string; value: { stringValue?: string } }> }; scopeSpans?: Array<{ spans?: Array<Omit<Span, 'service'>> }> }>;
  };
  for (const rs of doc.resourceSpans ?? []) {
    const service = rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? '?';
    for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) spans.push({ ...s, service, parentSpanId: s.parentSpanId ?? '' });
  }
}

beforeAll(async () => {
  collector = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (req.url === '/v1/traces' && (req.headers['content-type'] ?? '').includes('json')) keep(body);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', () => resolve()));
  fleet = await OwnFleet.start({
    services: ['device-registry', 'light-command', 'mqtt-bridge', 'gateway'],
    // debug: each service writes a line per request it handled (the gateway its access line at info).
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`, LOG_LEVEL: 'debug' },
  });
});

afterAll(async () => {
  await light?.stop();
  await fleet?.destroy();
  await new Promise<void>((resolve) => collector.close(() => resolve()));
});

it('continues a partner’s trace through gateway, light-command and mqtt-bridge, each span the child of the one before', async () => {
  const { key } = await fleet.partnerWithKey(['--permissions', 'device_provisioning,raw_commands', '--access-all-devices']);
  const id = randomDeviceId();
  const provisioned = await fleet.api('POST', `/v1/devices/${id}`, { key, body: { credential_format: 'derived-v1', credential_source: 'root_secret', root_secret: SECRET, product: 'light' } });
  expect(provisioned.status).toBe(201);
  light = new SimulatedLight({ brokerUrl: fleet.mqttUrl, deviceId: id, rootSecret: SECRET });
  await light.start();

  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const partnerSpan = '00f067aa0ba902b7';
  const sent = await fleet.api('POST', `/v1/devices/${id}/commands`, { key, body: { channel: 'light1', payload: 'pulse:ff0000,1200' }, headers: { traceparent: `00-${traceId}-${partnerSpan}-01` } });
  expect(sent.status).toBe(202);

  const inTrace = () => spans.filter((s) => s.traceId === traceId);
  // The gateway's own span ends with the answer, so it may be exported after its children's.
  await waitFor(
    () => new Set(inTrace().map((s) => s.service)).size >= 3 && inTrace().some((s) => s.service === 'mqtt-bridge') && inTrace().some((s) => s.service === 'gateway' && s.parentSpanId === partnerSpan),
    { timeoutMs: 15_000, what: 'spans of gateway (its request span among them), light-command and mqtt-bridge' },
  );
  const gateway = inTrace().find((s) => s.service === 'gateway' && s.parentSpanId === partnerSpan);
  expect(gateway?.name).toBe('POST /v1/devices/{device_id}/commands');
  const reachesGateway = (s: Span, byId: Map<string, Span>): boolean => {
    let at: Span | undefined = s;
    while (at && at !== gateway) at = byId.get(at.parentSpanId);
    return at === gateway;
  };
  // Each service exports its spans on its own schedule: a child can arrive before the span
  // between it and the gateway's. Wait until the chain is whole (or the time is up), then check.
  await waitFor(
    () => {
      const byId = new Map(inTrace().map((s) => [s.spanId, s]));
      return inTrace().every((s) => reachesGateway(s, byId));
    },
    { timeoutMs: 15_000, what: 'every span of the trace hanging from the gateway’s' },
  ).catch(() => undefined);
  // Every other span of the trace hangs, hop by hop, from the gateway's: none is orphaned.
  const byId = new Map(inTrace().map((s) => [s.spanId, s]));
  for (const s of inTrace()) {
    expect({ span: `${s.service} ${s.name}`, reachesGateway: reachesGateway(s, byId) }).toEqual({ span: `${s.service} ${s.name}`, reachesGateway: true });
  }
  // The trace id is in the log lines of every service that handled the command.
  for (const service of ['gateway', 'light-command', 'mqtt-bridge']) {
    const log = fs.readFileSync(path.join(fleet.dataDir, 'logs', `${service}.log`), 'utf8');
    expect({ service, logged: log.includes(`"trace_id":"${traceId}"`) }).toEqual({ service, logged: true });
  }
  const services = new Set(inTrace().map((s) => s.service));
  for (const service of ['gateway', 'light-command', 'mqtt-bridge']) expect({ service, traced: services.has(service) }).toEqual({ service, traced: true });
});
