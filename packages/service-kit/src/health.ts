import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { metricsRegistry } from './metrics';

export type ReadinessCheck = () => boolean | Promise<boolean>;

/**
 * Liveness (/healthz: the process answers), readiness (/readyz: every dependency check passes
 * and the service said it is ready) and Prometheus metrics (/metrics) on their own port, for
 * orchestrators, scrapers and the local fleet launcher.
 */
export class HealthServer {
  private ready = false;
  private readonly server: http.Server;

  constructor(private readonly checks: Record<string, ReadinessCheck>) {
    this.server = http.createServer((req, res) => void this.answer(req, res));
  }

  async listen(port: number, host = '0.0.0.0'): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => resolve());
    });
    return (this.server.address() as AddressInfo).port;
  }

  markReady(ready = true): void {
    this.ready = ready;
  }

  private async answer(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    res.setHeader('Cache-Control', 'no-store');
    if (req.url === '/metrics') {
      res.setHeader('Content-Type', metricsRegistry.contentType);
      res.end(await metricsRegistry.metrics());
      return;
    }
    res.setHeader('Content-Type', 'application/json');
    if (req.url === '/healthz') {
      res.end(JSON.stringify({ status: 'ok' }));
      return;
    }
    if (req.url === '/readyz') {
      const results: Record<string, boolean> = {};
      for (const [name, check] of Object.entries(this.checks)) {
        try {
          results[name] = await check();
        } catch {
          results[name] = false;
        }
      }
      const ok = this.ready && Object.values(results).every(Boolean);
      res.statusCode = ok ? 200 : 503;
      res.end(JSON.stringify({ status: ok ? 'ready' : 'not_ready', started: this.ready, checks: results }));
      return;
    }
    res.statusCode = 404;
    res.end(JSON.stringify({ status: 'unknown' }));
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
