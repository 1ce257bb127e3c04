import { HealthServer, loadConfig, baseConfigSchema, z } from '@fleet/service-kit';

describe('HealthServer', () => {
  it('is live at once and ready only when marked ready and every check passes', async () => {
    let dbUp = true;
    const health = new HealthServer({ db: () => dbUp, cache: async () => true });
    const port = await health.listen(0, '127.0.0.1');
    const get = async (path: string) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`);
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    expect((await get('/healthz')).status).toBe(200);
    expect((await get('/readyz')).status).toBe(503);
    health.markReady();
    expect(await get('/readyz')).toEqual({ status: 200, body: { status: 'ready', started: true, checks: { db: true, cache: true } } });
    dbUp = false;
    expect((await get('/readyz')).status).toBe(503);
    await health.close();
  });
});

describe('loadConfig', () => {
  const schema = baseConfigSchema.extend({ GATEWAY_PORT: z.coerce.number().int().default(8080) });

  it('applies defaults and coerces numbers', () => {
    const config = loadConfig(schema, { HEALTH_PORT: '9001' });
    expect(config).toMatchObject({ NATS_URL: 'nats://127.0.0.1:4222', HEALTH_PORT: 9001, GATEWAY_PORT: 8080, LOG_LEVEL: 'info' });
  });

  it('names every invalid variable', () => {
    expect(() => loadConfig(schema, { HEALTH_PORT: 'x', LOG_LEVEL: 'loud' })).toThrow(/HEALTH_PORT.*LOG_LEVEL|LOG_LEVEL.*HEALTH_PORT/);
  });
});
