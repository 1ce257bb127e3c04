/**
 * Sends one delivery to a receiver: POST, no redirects followed (a 3xx is a failed attempt, so
 * a delivery never lands on another host), the connection only to addresses the receiver policy
 * allows (checked on every address the name resolves to at connection time), and the whole
 * exchange bounded by the timeout. Connections are kept alive between deliveries.
 */
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { addressAllowed, type ReceiverPolicy } from '../domain/receiver-url';

export interface PostOutcome {
  /** The receiver's HTTP status, or null when none came (refused, timed out, unreachable). */
  status: number | null;
  /** Why the attempt failed, for the delivery log; null on a 2xx. */
  error: string | null;
}

/** Largest part of a receiver's answer read (the rest is dropped). */
const ANSWER_MAX_BYTES = 64 * 1024;

export class ReceiverClient {
  private readonly agents: { http: http.Agent; https: https.Agent };

  constructor(private readonly options: { policy: ReceiverPolicy; timeoutMs: number; maxSocketsPerHost: number }) {
    const lookup = this.guardedLookup();
    const common = { keepAlive: true, maxSockets: options.maxSocketsPerHost, lookup } as const;
    this.agents = { http: new http.Agent(common), https: new https.Agent(common) };
  }

  post(url: string, headers: Record<string, string>, body: string): Promise<PostOutcome> {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return Promise.resolve({ status: null, error: 'the endpoint URL is not valid' });
    }
    // An address written in the URL is never looked up: it is checked here.
    const literal = target.hostname.replace(/^\[|\]$/g, '');
    if (net.isIP(literal) && !addressAllowed(literal, this.options.policy)) return Promise.resolve({ status: null, error: `address ${literal} is not allowed` });
    return new Promise((resolve) => {
      let settled = false;
      const finish = (outcome: PostOutcome): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      const secure = target.protocol === 'https:';
      const request = (secure ? https : http).request(
        target,
        { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, agent: secure ? this.agents.https : this.agents.http },
        (answer) => {
          let read = 0;
          answer.on('data', (chunk: Buffer) => {
            read += chunk.length;
            if (read > ANSWER_MAX_BYTES) answer.destroy();
          });
          const settle = () => {
            const status = answer.statusCode ?? null;
            if (status !== null && status >= 200 && status < 300) finish({ status, error: null });
            else if (status !== null && status >= 300 && status < 400) finish({ status, error: 'redirects are not followed' });
            else finish({ status, error: `the receiver answered ${status}` });
          };
          answer.on('end', settle);
          answer.on('close', settle);
          answer.on('error', settle);
        },
      );
      const timer = setTimeout(() => {
        request.destroy();
        finish({ status: null, error: `no answer within ${this.options.timeoutMs} ms` });
      }, this.options.timeoutMs);
      request.on('error', (err: NodeJS.ErrnoException) => finish({ status: null, error: err.message || err.code || 'the request failed' }));
      request.end(body);
    });
  }

  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  /** dns.lookup keeping only allowed addresses: a name that resolves inward is refused at connection time. */
  private guardedLookup(): net.LookupFunction {
    const policy = this.options.policy;
    return ((hostname: string, options: dns.LookupOptions, callback: (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void) => {
      dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
        if (err) return callback(err, '', 0);
        const allowed = addresses.filter((a) => addressAllowed(a.address, policy));
        if (allowed.length === 0) {
          const refused: NodeJS.ErrnoException = new Error(`${hostname} resolves to no allowed address`);
          refused.code = 'EADDRNOTALLOWED';
          return callback(refused, '', 0);
        }
        if (options.all) return callback(null, allowed);
        const first = allowed[0] as dns.LookupAddress;
        return callback(null, first.address, first.family);
      });
    }) as net.LookupFunction;
  }
}

const allowedKinds = (policy: ReceiverPolicy): string => (policy.local ? 'a public, loopback or private address' : 'a public address');

/**
 * Every address a receiver's host resolves to now is allowed (the check when an endpoint is
 * created or changed). A name that does not resolve (yet) is taken: there is nothing to refuse,
 * and each delivery checks the addresses it connects to.
 */
export async function hostAllowed(url: string, policy: ReceiverPolicy): Promise<{ ok: true } | { ok: false; reason: string }> {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) return addressAllowed(host, policy) ? { ok: true } : { ok: false, reason: `url points at ${host}, which is not ${allowedKinds(policy)}` };
  let addresses: dns.LookupAddress[];
  try {
    addresses = await dns.promises.lookup(host, { all: true });
  } catch {
    // Not resolvable yet (a receiver being set up, a DNS hiccup): nothing to refuse now; every
    // delivery checks the addresses it connects to, and its failures show in the delivery log.
    return { ok: true };
  }
  const refused = addresses.find((a) => !addressAllowed(a.address, policy));
  return refused ? { ok: false, reason: `url's host ${host} resolves to ${refused.address}, which is not ${allowedKinds(policy)}` } : { ok: true };
}
