/**
 * A webhook receiver for tests and benchmarks: a real HTTP server on loopback that records every
 * delivery, checks its Standard Webhooks signature with the `standardwebhooks` package against
 * the secrets it was given, and answers 204, or 503 while told to fail (for some events or for
 * the next N deliveries).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface ReceivedDelivery {
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The event, parsed. */
  event: { id: string; type: string; version: number; occurred_at: string; device_id?: string; data: Record<string, unknown> };
  /** The signature verified with one of the trusted secrets. */
  verified: boolean;
  /** What the receiver answered. */
  status: number;
  at: number;
}

export class WebhookReceiver {
  readonly received: ReceivedDelivery[] = [];
  /** Deliveries to fail next, whatever their event. */
  failures = 0;
  /** Failures left per event id (webhook-id). */
  readonly failuresFor = new Map<string, number>();
  /** Called on every delivery (benchmarks time them here). */
  onDelivery?: (delivery: ReceivedDelivery) => void;
  private readonly secrets: string[] = [];
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(req.headers['webhook-id']);
      const forId = this.failuresFor.get(id) ?? 0;
      let status = 204;
      if (forId > 0) {
        this.failuresFor.set(id, forId - 1);
        status = 503;
      } else if (this.failures > 0) {
        this.failures -= 1;
        status = 503;
      }
      const delivery = { headers: req.headers, body, event: JSON.parse(body) as ReceivedDelivery['event'], verified: this.verify(body, req.headers), status, at: Date.now() };
      this.received.push(delivery);
      this.onDelivery?.(delivery);
      res.writeHead(status).end();
    });
  });
  url = '';

  /** Listens on a free loopback port; `url` is then where deliveries go. */
  async start(path = '/hook'): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', () => resolve()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${path}`;
    return this;
  }

  /** Trusts a signing secret (as POST /v1/webhooks or a rotation answered it). */
  trust(secret: string): this {
    this.secrets.push(secret);
    return this;
  }

  /** The deliveries that were answered 2xx. */
  accepted(): ReceivedDelivery[] {
    return this.received.filter((d) => d.status < 300);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private verify(body: string, headers: http.IncomingHttpHeaders): boolean {
    const plain = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, String(v)]));
    return this.secrets.some((secret) => {
      try {
        new Webhook(secret).verify(body, plain);
        return true;
      } catch {
        return false;
      }
    });
  }
}
