import { HealthServer, metricsRegistry, startProcessMetrics } from '@fleet/service-kit';

describe('/metrics on the health port', () => {
  let server: HealthServer;
  let url: string;
  beforeAll(async () => {
    startProcessMetrics({ service: 'metrics-test', instance: 'metrics-test-0' });
    server = new HealthServer({});
    url = `http://127.0.0.1:${await server.listen(0, '127.0.0.1')}`;
  });
  afterAll(() => server.close());

  it('answers Prometheus text with process and event-loop metrics, labelled with the service and instance', async () => {
    const res = await fetch(`${url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    for (const family of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_p99_seconds', 'nodejs_heap_size_used_bytes']) {
      expect(text).toMatch(new RegExp(`^${family}\\{[^}]*service="metrics-test"[^}]*instance="metrics-test-0"`, 'm'));
    }
  });

  it('keeps /healthz and /readyz as they were', async () => {
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ status: 'ok' });
    expect((await fetch(`${url}/readyz`)).status).toBe(503);
    expect(metricsRegistry.contentType).toMatch(/text\/plain/);
  });
});
