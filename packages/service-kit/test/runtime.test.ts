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

describe('ServiceRuntime and stop signals', () => {
  it('closes what a service opened and exits on SIGTERM while it is still starting (before ready)', async () => {
    const { spawn } = await import('node:child_process');
    const script = `
      const { ServiceRuntime, loadConfig, baseConfigSchema } = require('@fleet/service-kit');
      (async () => {
        const config = loadConfig(baseConfigSchema, { NATS_URL: process.env.NATS_URL || 'nats://127.0.0.1:4222', HEALTH_PORT: '0', LOG_LEVEL: 'silent' });
        const runtime = await ServiceRuntime.start({ service: 'signal-test', config });
        runtime.onClose(() => { process.stdout.write('closed\\n'); });
        process.stdout.write('started\\n');
        setInterval(() => undefined, 1000); // migrating, say: never ready
      })();`;
    const child = spawn(process.execPath, ['-e', script], { cwd: __dirname, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('started') && !child.killed) child.kill('SIGTERM');
    });
    const exit = await new Promise<{ code: number | null; signal: string | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    expect(out).toContain('closed');
    expect(exit).toEqual({ code: 0, signal: null });
  }, 20_000);
});
