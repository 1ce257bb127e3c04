import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '@fleet/service-kit';
import { topicOfRoutingKey } from '../domain/broker-access';
import type { BrokerHook, Verdict } from './broker-hook';

/** Bodies are a few fields: anything longer is not a broker asking. */
const BODY_MAX = 8 * 1024;
/** A question not answered by then is refused (the broker then refuses the client). */
const ANSWER_WITHIN_MS = 2000;

type Fields = Record<string, string>;
type Answer = { status: number; type: 'json' | 'text'; body: string };

/**
 * The broker authentication and authorization hook over HTTP (POST only), in the forms brokers
 * that scale out ask it:
 *
 *   EMQX 5 (HTTP authentication and authorization, JSON bodies, answers `{"result": …}`)
 *     /mqtt/emqx/authn   {clientid, username, password}
 *     /mqtt/emqx/authz   {clientid, username, topic, action: publish | subscribe}
 *   RabbitMQ (rabbitmq_auth_backend_http, form bodies, answers `allow` or `deny`)
 *     /mqtt/rabbitmq/user      username, password (client_id when sent)
 *     /mqtt/rabbitmq/vhost     username, vhost
 *     /mqtt/rabbitmq/resource  username, resource, name, permission
 *     /mqtt/rabbitmq/topic     username, permission (write | read), routing_key
 *
 * A failure to decide (the database out of reach) answers 503, which every broker takes as a
 * refusal: a hook outage lets no new client in, and clients already connected are untouched.
 */
export class HookServer {
  private readonly server: http.Server;

  constructor(
    private readonly hook: BrokerHook,
    private readonly logger: Logger,
  ) {
    this.server = http.createServer((req, res) => void this.handle(req, res));
    this.server.keepAliveTimeout = 65_000;
  }

  async listen(port: number, host = '0.0.0.0'): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => resolve());
    });
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let answer: Answer;
    try {
      const fields = await readFields(req);
      answer = await withinTime(this.answer(req.method ?? '', (req.url ?? '').split('?')[0] ?? '', fields));
    } catch (err) {
      const status = (err as { status?: number }).status ?? 503;
      if (status === 503) this.logger.warn({ err }, 'broker hook could not decide; refused');
      answer = { status, type: 'text', body: status === 503 ? 'deny' : 'bad request' };
    }
    res.writeHead(answer.status, { 'Content-Type': answer.type === 'json' ? 'application/json' : 'text/plain', 'Cache-Control': 'no-store' });
    res.end(answer.body);
  }

  private async answer(method: string, path: string, f: Fields): Promise<Answer> {
    if (method !== 'POST') return { status: 405, type: 'text', body: 'POST only' };
    const user = f.username ?? '';
    switch (path) {
      case '/mqtt/emqx/authn': {
        const verdict = await this.hook.authenticate(user, f.password ?? '', f.clientid);
        // The platform may use every topic anyway: as a superuser EMQX asks nothing more of it.
        return json({ result: verdict, is_superuser: verdict === 'allow' && this.hook.isPlatform(user) });
      }
      case '/mqtt/emqx/authz': {
        const action = f.action === 'publish' || f.action === 'subscribe' ? f.action : undefined;
        const verdict: Verdict = action && f.topic ? await this.hook.authorize(user, f.topic, action, f.clientid) : 'deny';
        return json({ result: verdict });
      }
      case '/mqtt/rabbitmq/user':
        return text(await this.hook.authenticate(user, f.password ?? '', f.client_id));
      case '/mqtt/rabbitmq/vhost':
        return text(f.vhost === '/' && (await this.hook.known(user)) ? 'allow' : 'deny');
      case '/mqtt/rabbitmq/resource':
        return text(await this.resource(user, f));
      case '/mqtt/rabbitmq/topic': {
        const action = f.permission === 'write' ? 'publish' : f.permission === 'read' ? 'subscribe' : undefined;
        return text(action && f.routing_key ? await this.hook.authorize(user, topicOfRoutingKey(f.routing_key), action) : 'deny');
      }
      default:
        return { status: 404, type: 'text', body: 'unknown hook path' };
    }
  }

  /**
   * RabbitMQ's resource question: a device uses the MQTT exchange and its own subscription
   * queues (named after its client id, which is its device id); the topic question then decides
   * which topics.
   */
  private async resource(user: string, f: Fields): Promise<Verdict> {
    if (this.hook.isPlatform(user)) return 'allow';
    if (!(await this.hook.known(user))) return 'deny';
    if (f.resource === 'exchange') return f.name === 'amq.topic' ? 'allow' : 'deny';
    if (f.resource === 'queue') return (f.name ?? '').startsWith(`mqtt-subscription-${user}qos`) ? 'allow' : 'deny';
    return f.resource === 'topic' ? 'allow' : 'deny';
  }
}

const json = (value: unknown): Answer => ({ status: 200, type: 'json', body: JSON.stringify(value) });
const text = (verdict: Verdict): Answer => ({ status: 200, type: 'text', body: verdict });

async function readFields(req: http.IncomingMessage): Promise<Fields> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > BODY_MAX) throw Object.assign(new Error('hook body too large'), { status: 413 });
    chunks.push(chunk);
  }
  const raw = Buffer.concat(chunks).toString('utf8');
  if ((req.headers['content-type'] ?? '').includes('application/json')) {
    let parsed: unknown;
    try {
      parsed = raw ? JSON.parse(raw) : {};
    } catch {
      throw Object.assign(new Error('hook body is not JSON'), { status: 400 });
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw Object.assign(new Error('hook body is not an object'), { status: 400 });
    return Object.fromEntries(Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === 'string'));
  }
  return Object.fromEntries(new URLSearchParams(raw));
}

function withinTime<T>(work: Promise<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no decision within ${ANSWER_WITHIN_MS} ms`)), ANSWER_WITHIN_MS);
    work.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}
