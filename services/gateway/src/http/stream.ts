import http from 'node:http';
import https from 'node:https';
import type { Request, Response } from 'express';
import type { Principal } from '@fleet/contracts';
import { ApiError, fromEnvelopeError, ServiceUnavailableError, ValidationError, type Bus, type Logger } from '@fleet/service-kit';
import { STREAM_POSITION_PATTERN } from '../routes/schemas';
import { routeId, type RouteDef } from '../routes/types';
import { sendError } from './error-response';

/** How long the stream server may take to answer the gateway's GET with its head. */
export const STREAM_HEAD_TIMEOUT_MS = 10_000;

/**
 * How long an open stream may stay silent before the gateway ends it: three missed keep-alive
 * comments (the events service writes one every 15 s). The partner reconnects with Last-Event-ID.
 */
export const STREAM_IDLE_MS = 45_000;

/** Largest error body of the stream server the gateway reads and relays. */
const MAX_REFUSAL_BYTES = 64 * 1024;

const STREAM_POSITION = new RegExp(STREAM_POSITION_PATTERN);

/** How often open streams are checked against their key and permission even when no change was heard. */
export const STREAM_RECHECK_MS = 5_000;

/**
 * Whether the partner holding a stream may still read it: its key still authenticates and still
 * carries the route's permission. Throws when that cannot be told (the key store is away): the
 * stream is then kept and checked again later.
 */
export type StillAllowed = () => Promise<boolean>;

/**
 * The event streams open through this gateway. Each ends when its partner leaves or its upstream
 * ends; on shutdown the rest are ended at once (main.ts) so the server can close: a partner's
 * client reconnects, to another replica, with Last-Event-ID.
 *
 * A stream outlives the request that opened it, so its key and permission are checked again:
 * at once when a partner or key change is heard (recheck(), from the auth change listener) and
 * every `recheckMs` while any stream is open (a change missed while the listener was away). A
 * stream whose key was revoked, whose partner was disabled or lost the route's permission is
 * ended; its client reconnects and is refused.
 */
export class OpenStreams {
  private readonly open = new Map<() => void, StillAllowed | undefined>();
  private timer?: NodeJS.Timeout;
  private checking?: Promise<number>;

  constructor(private readonly recheckMs = STREAM_RECHECK_MS) {}

  get size(): number {
    return this.open.size;
  }

  /** Tracks an open stream by how to end it (and who may keep it); the answer forgets it again. */
  track(end: () => void, stillAllowed?: StillAllowed): () => void {
    this.open.set(end, stillAllowed);
    if (!this.timer) {
      this.timer = setInterval(() => void this.recheck(), this.recheckMs);
      this.timer.unref();
    }
    return () => {
      this.open.delete(end);
      if (this.open.size === 0) this.stopTimer();
    };
  }

  endAll(): void {
    for (const end of [...this.open.keys()]) end();
    this.stopTimer();
  }

  /** Ends every stream its partner may no longer read; resolves with how many were ended. */
  recheck(): Promise<number> {
    // One check at a time: a change heard during a check is covered by a check right after it.
    const next = (this.checking ?? Promise.resolve(0)).then(() => this.checkAll());
    this.checking = next;
    return next;
  }

  private async checkAll(): Promise<number> {
    let ended = 0;
    for (const [end, stillAllowed] of [...this.open]) {
      if (!stillAllowed || !this.open.has(end)) continue;
      let allowed: boolean;
      try {
        allowed = await stillAllowed();
      } catch {
        continue;
      }
      if (!allowed && this.open.has(end)) {
        end();
        ended++;
      }
    }
    return ended;
  }

  private stopTimer(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

export interface StreamDeps {
  bus: Bus;
  logger: Logger;
  streams: OpenStreams;
  /** The head and idle timeouts of the upstream GET (STREAM_HEAD_TIMEOUT_MS, STREAM_IDLE_MS); tests shorten them. */
  streamTimeouts?: { headMs: number; idleMs: number };
}

/**
 * The stream position to resume after: the `Last-Event-ID` header (what an EventSource sends
 * back when it reconnects) wins over the `last_event_id` query parameter, for clients that cannot
 * set headers. An empty header is no header.
 */
function lastEventId(req: Request, query: Record<string, unknown>): string | undefined {
  const header = req.get('Last-Event-ID')?.trim();
  if (header !== undefined && header !== '') {
    if (!STREAM_POSITION.test(header)) {
      throw new ValidationError('invalid Last-Event-ID header: send back the `id:` of the last event received (decimal digits).');
    }
    return header;
  }
  return typeof query.last_event_id === 'string' ? query.last_event_id : undefined;
}

/**
 * A route answered with a live `text/event-stream` (GET /v1/events): the permission, the query
 * and the request window were dealt with by the caller. The owner answers where the stream is
 * read (`events.stream.open`: `{url}`), or refuses (its error is the usual JSON error); the
 * gateway GETs that URL and relays the body to the partner as it arrives, each chunk written at
 * once, never buffered. No request timeout applies: the stream lasts until the partner leaves
 * (the upstream request is then destroyed), the upstream ends (so does the partner's answer),
 * the upstream stays silent past STREAM_IDLE_MS, or the gateway shuts down.
 */
export async function relayStream(
  deps: StreamDeps,
  req: Request,
  res: Response,
  route: RouteDef,
  params: Record<string, string>,
  query: Record<string, unknown>,
  principal: Principal,
  requestId: string,
  stillAllowed?: StillAllowed,
): Promise<void> {
  if (!('stream' in route.target)) throw new TypeError(`${routeId(route)} does not answer with a stream`);
  const resumeAfter = lastEventId(req, query);
  const { last_event_id: _fromQuery, ...rest } = query;
  const envelope = {
    request_id: requestId,
    route: routeId(route),
    principal,
    params,
    query: { ...rest, ...(resumeAfter !== undefined ? { last_event_id: resumeAfter } : {}) },
  };
  const reply = await deps.bus.request(route.target.stream, envelope);
  if (!reply.ok) throw fromEnvelopeError(reply.error);
  if (!reply.body) throw new ServiceUnavailableError();
  let target: URL;
  try {
    target = new URL(reply.body.url);
  } catch {
    throw new ServiceUnavailableError();
  }
  await pipeStream(deps, target, req, res, requestId, stillAllowed);
}

const unavailable = () => new ServiceUnavailableError('The event stream could not be opened; retry after Retry-After seconds.');

function pipeStream(deps: StreamDeps, target: URL, req: Request, res: Response, requestId: string, stillAllowed?: StillAllowed): Promise<void> {
  const { headMs, idleMs } = deps.streamTimeouts ?? { headMs: STREAM_HEAD_TIMEOUT_MS, idleMs: STREAM_IDLE_MS };
  // The partner left while the stream was being opened: nothing to relay to.
  if (res.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const client = target.protocol === 'https:' ? https : http;
    let streaming = false;
    let settled = false;
    let untrack: (() => void) | undefined;
    const settle = () => {
      if (settled) return;
      settled = true;
      untrack?.();
      resolve();
    };

    const upstream = client.request(target, { method: 'GET', headers: { accept: 'text/event-stream', 'x-request-id': requestId } });

    /** Before the stream began: the partner gets a JSON error instead. */
    const refuse = (failure: ApiError, why: string) => {
      if (settled) return;
      upstream.destroy();
      deps.logger.warn({ request_id: requestId, code: failure.code, why }, 'event stream not opened');
      if (!res.headersSent && !res.destroyed) sendError(res, failure);
      settle();
    };

    /**
     * Ends the partner's answer (the upstream ended, failed or went silent, or the gateway shuts
     * down: then the connection closes too, or the kept-alive connection would hold the server open).
     */
    const endPartner = (closeConnection = false) => {
      upstream.destroy();
      if (!res.writableEnded) res.end(closeConnection ? () => req.socket.end() : undefined);
      settle();
    };

    upstream.setTimeout(headMs, () => {
      if (!streaming) refuse(unavailable(), 'no answer from the stream server in time');
      else {
        deps.logger.info({ request_id: requestId }, 'event stream silent too long; ended');
        endPartner();
      }
    });
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      if (!streaming) refuse(unavailable(), err.code ?? err.message);
      else endPartner();
    });
    upstream.on('response', (answer) => {
      answer.on('error', () => (streaming ? endPartner() : refuse(unavailable(), 'the stream server broke off its answer')));
      if (answer.statusCode !== 200) {
        relayRefusal(answer, res, requestId, refuse, settle);
        return;
      }
      if (settled || res.destroyed) {
        upstream.destroy();
        settle();
        return;
      }
      streaming = true;
      upstream.setTimeout(idleMs);
      // no-store, as on every /v1 answer (spec, response conventions): a stream must not be cached either.
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
      res.flushHeaders();
      req.socket.setNoDelay(true);
      if (req.method === 'HEAD') {
        // The head of the GET answer, nothing more: the upstream is let go as a partner that left would.
        endPartner();
        return;
      }
      untrack = deps.streams.track(() => endPartner(true), stillAllowed);
      answer.on('data', (chunk: Buffer) => {
        // Written at once (no compression, no buffering); a partner that reads slowly holds the upstream back.
        if (!res.write(chunk)) {
          answer.pause();
          res.once('drain', () => answer.resume());
        }
      });
      answer.on('end', () => endPartner());
    });

    // The partner left (or its answer is complete): the upstream request goes too.
    res.on('close', () => {
      const left = streaming && !res.writableFinished;
      upstream.destroy();
      // A stream the partner left is still logged and counted, as a complete answer is on 'finish' (app.ts).
      if (left) (res.locals.answered as (() => void) | undefined)?.();
      settle();
    });
    upstream.end();
  });
}

/**
 * The stream server refused before streaming (the partner's streams are all taken meanwhile):
 * its JSON error is relayed with this request's id. Anything else (no error body, a 401 about
 * the gateway's own ticket, a status below 400) is a 503, and so is a 404: the stream server
 * knows nothing but its one-time URLs, so its 404 says the URL was unknown, already used or
 * expired (a slow hop between events.stream.open and this GET), the platform's failure and no
 * answer about the partner's device (events.stream.open refuses those, over the bus). The
 * partner retries, with Last-Event-ID.
 */
function relayRefusal(answer: http.IncomingMessage, res: Response, requestId: string, refuse: (failure: ApiError, why: string) => void, settle: () => void): void {
  const status = answer.statusCode ?? 502;
  const chunks: Buffer[] = [];
  let size = 0;
  answer.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_REFUSAL_BYTES) refuse(unavailable(), `an error body over ${MAX_REFUSAL_BYTES} bytes (HTTP ${status})`);
    else chunks.push(chunk);
  });
  answer.on('end', () => {
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = undefined;
    }
    const error = body as { error?: unknown; code?: unknown } | undefined;
    if (status === 404) {
      refuse(unavailable(), 'the stream server no longer knows the stream (its one-time URL unknown, used or expired)');
      return;
    }
    if (status < 400 || status === 401 || typeof error?.error !== 'string' || typeof error.code !== 'string') {
      refuse(unavailable(), `HTTP ${status} without an error body to relay`);
      return;
    }
    if (res.headersSent || res.destroyed) {
      settle();
      return;
    }
    const retryAfter = answer.headers['retry-after'];
    if (typeof retryAfter === 'string' && /^[0-9]+$/.test(retryAfter)) res.setHeader('Retry-After', retryAfter);
    else if (status === 429 || status === 503) res.setHeader('Retry-After', '1');
    res.status(status).json({ ...(body as Record<string, unknown>), request_id: requestId });
    settle();
  });
}
