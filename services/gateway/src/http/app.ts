import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import type https from 'node:https';
import type { Duplex } from 'node:stream';
import express, { type NextFunction, type Request, type Response } from 'express';
import { ApiError, parseTraceparent, startHop, telemetryOn, UnauthorizedError, ValidationError, withWork, type Logger } from '@fleet/service-kit';
import { docsRouter } from '../docs';
import { apiPipeline, callerChecksFirst, type PipelineDeps } from './api-pipeline';
import { sendError } from './error-response';
import { countAnswer } from './request-metrics';

export interface AppOptions {
  requireTls: boolean;
  trustedProxies: string[];
  openApiDocument: () => Record<string, unknown>;
}

/** Largest JSON body accepted; bigger is 413. */
const BODY_LIMIT = '1mb';

export function createApp(deps: PipelineDeps, options: AppOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  // Only the configured proxies may tell us the client address and protocol.
  app.set('trust proxy', options.trustedProxies.length ? options.trustedProxies : false);

  app.use(conventions(deps.logger));
  if (options.requireTls) app.use(httpsOnly);
  app.use(docsRouter(options.openApiDocument));
  app.use(headerRules(deps));
  // Bodies are read raw (never decoded: headerRules refused every Content-Encoding but identity)
  // so idempotency can fingerprint them and parse errors follow the permission check.
  // A route that streams its body (platform file upload) is read by its owner, never here.
  const streamsBody = (req: http.IncomingMessage): boolean => {
    const found = deps.matcher.matchRequest(req as Request);
    return found.kind === 'found' && 'upload' in found.match.route.target;
  };
  app.use(express.raw({ type: (req) => !streamsBody(req), limit: BODY_LIMIT, inflate: false }));
  app.use(asyncRoute(apiPipeline(deps)));
  app.use(errorHandler(deps));
  return app;
}

const newRequestId = (): string => `req_${randomUUID().replace(/-/g, '')}`;

/**
 * X-Request-Id and Cache-Control on every response; the request's trace (the partner's when it
 * sent a valid traceparent, else a new one), under which every service it reaches logs and
 * spans are exported when OTLP is configured; its metrics and one access log line.
 * FLEET_TELEMETRY=off leaves out the trace and the metrics (the benchmarks' comparison).
 */
function conventions(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const requestId = newRequestId();
    res.locals.requestId = requestId;
    res.setHeader('X-Request-Id', requestId);
    res.setHeader('Cache-Control', 'no-store');
    const hop = telemetryOn ? startHop('gateway request', 'server', parseTraceparent(req.headers.traceparent as string | undefined)) : undefined;
    if (!hop && !logger.isLevelEnabled('info')) return next();
    const started = performance.now();
    // One listener for the answer: its metrics, its span (when exported) and its access line.
    // A streamed answer the partner leaves before its end never finishes: its relay calls
    // res.locals.answered when the connection closes (http/stream.ts).
    const answered = (): void => {
      const route = (res.locals.routeTemplate as string | undefined) ?? (req.route as { path?: string } | undefined)?.path ?? 'unmatched';
      const ms = performance.now() - started;
      if (hop) countAnswer(route, req.method, res.statusCode, ms / 1000);
      if (hop?.recording) {
        hop.end({
          name: `${req.method} ${route}`,
          attributes: { 'http.request.method': req.method, 'http.route': route, 'http.response.status_code': res.statusCode },
          ...(res.statusCode >= 500 ? { error: `HTTP ${res.statusCode}` } : {}),
        });
      }
      if (!logger.isLevelEnabled('info')) return;
      logger.info(
        { request_id: requestId, trace_id: hop?.context.traceId, method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 10) / 10, key_prefix: res.locals.keyPrefix },
        'request',
      );
    };
    res.on('finish', answered);
    res.locals.answered = answered;
    if (hop) withWork({ trace: hop.context, requestId }, next);
    else next();
  };
}

/** In production plain HTTP is refused unless a trusted proxy says the client used HTTPS. */
function httpsOnly(req: Request, res: Response, next: NextFunction): void {
  if (req.secure) return next();
  refuseUnread(req, res, new ApiError(403, 'https_required', 'HTTPS is required.'));
}

/** Request headers a request may carry at most once: a second one would be ignored or merged silently. */
const SINGLE_HEADERS = ['authorization', 'content-type', 'content-encoding', 'content-length', 'idempotency-key'];

/**
 * Rules that hold on every route, before anything else looks at the request: each of
 * SINGLE_HEADERS at most once and a query string of percent-encoded UTF-8 (else 400), and no
 * Content-Encoding but `identity` (else 415: bodies are taken as sent, never decompressed).
 * The body is not read; a valid key still counts the request (refuseBeforeReading).
 */
function headerRules(deps: PipelineDeps) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const seen = new Set<string>();
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = (req.rawHeaders[i] as string).toLowerCase();
      if (!SINGLE_HEADERS.includes(name)) continue;
      if (seen.has(name)) {
        if (name === 'authorization') {
          // Two keys name no one caller: a malformed key, 401, and nothing counted against either.
          res.locals.keyPresented = true;
          refuseUnread(req, res, new UnauthorizedError());
        } else void refuseBeforeReading(deps, req, res, new ValidationError(`The ${req.rawHeaders[i]} header was sent more than once; send it once.`));
        return;
      }
      seen.add(name);
    }
    if (!isUtf8QueryString(req.url)) {
      void refuseBeforeReading(deps, req, res, new ValidationError('The query string is not valid percent-encoded UTF-8.'));
      return;
    }
    const coding = req.get('Content-Encoding');
    if (coding !== undefined && coding.trim() !== '' && coding.trim().toLowerCase() !== 'identity') {
      void refuseBeforeReading(deps, req, res, new ApiError(415, 'unsupported_media_type', 'Content-Encoding is not supported: send the body uncompressed (identity).'));
      return;
    }
    next();
  };
}

/**
 * A refusal made before the route's checks (a header rule, a body the reader refused): answered
 * without reading the rest of the body, after the checks the spec puts first (callerChecksFirst):
 * on a route that exists, a missing or bad key is 401, a full window 429, a missing permission
 * 403, an unreachable key or limit store 503; a valid key spends its request window and gets its
 * RateLimit-* headers, as the spec asks of every answer to an authenticated request.
 */
async function refuseBeforeReading(deps: PipelineDeps, req: Request, res: Response, failure: unknown): Promise<void> {
  let answer = failure;
  try {
    await callerChecksFirst(deps, req, res);
  } catch (err) {
    answer = err;
  }
  refuseUnread(req, res, answer);
}

/** True when every name and value of the URL's query string decodes as percent-encoded UTF-8. */
function isUtf8QueryString(url: string): boolean {
  const at = url.indexOf('?');
  if (at < 0) return true;
  for (const piece of url.slice(at + 1).split(/[&=]/)) {
    try {
      decodeURIComponent(piece.replace(/\+/g, ' '));
    } catch {
      return false;
    }
  }
  return true;
}

function asyncRoute(handler: (req: Request, res: Response) => Promise<void>) {
  return (req: Request, res: Response, next: NextFunction): void => {
    handler(req, res).catch(next);
  };
}

function errorHandler(deps: PipelineDeps) {
  const { logger } = deps;
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    let failure = err;
    const status = (err as { status?: unknown }).status;
    const type = (err as { type?: unknown }).type;
    // Errors of the body reader carry a 4xx status and a type: the request's fault, never a 500.
    const readerRefusal = !(err instanceof ApiError) && typeof type === 'string' && typeof status === 'number' && status >= 400 && status < 500;
    if (readerRefusal && status === 413) {
      failure = new ApiError(413, 'payload_too_large', `The body exceeds ${BODY_LIMIT}.`);
    } else if (readerRefusal && status === 415) {
      failure = new ApiError(415, 'unsupported_media_type', 'Send the body uncompressed as Content-Type: application/json.');
    } else if (readerRefusal) {
      failure = new ApiError(400, 'validation_error', 'The request body could not be read.');
    } else if (!(err instanceof ApiError)) {
      logger.error({ err, request_id: res.locals.requestId, path: req.path }, 'unhandled error');
    }
    if (res.headersSent) {
      res.end();
      return;
    }
    // The body reader refuses before the pipeline ran: the caller was not counted yet.
    if (readerRefusal) void refuseBeforeReading(deps, req, res, failure);
    else refuseUnread(req, res, failure);
  };
}

/**
 * Answers a request refused before all of its body was read (a header rule, a body over the
 * limit). What the client still sends is read and dropped first, for at most LINGER_MS:
 * answering and closing the connection with unread input would make the kernel reset it, and
 * the client, still writing, would lose the answer.
 */
function refuseUnread(req: Request, res: Response, failure: unknown): void {
  if (req.complete) {
    sendError(res, failure);
    return;
  }
  let answered = false;
  const answer = () => {
    if (answered) return;
    answered = true;
    clearTimeout(timer);
    // A kept-alive connection outlives this request: leave no listener behind on it.
    req.socket.off('close', answer);
    if (!res.headersSent && !res.destroyed) sendError(res, failure);
  };
  const timer = setTimeout(answer, LINGER_MS);
  req.on('data', () => undefined);
  req.once('end', answer);
  req.once('error', answer);
  req.socket.once('close', answer);
  req.resume();
}

/** Status, code and message of a request Node's HTTP parser refused before the app saw it. */
function parserRefusal(code: string | undefined): { status: number; reason: string; code: string; message: string } {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, reason: 'Request Header Fields Too Large', code: 'headers_too_large', message: 'The request line and headers are larger than the gateway accepts (16 KB).' };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, reason: 'Payload Too Large', code: 'payload_too_large', message: 'The chunk extensions are larger than the gateway accepts.' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, reason: 'Request Timeout', code: 'request_timeout', message: 'The request was not received in time.' };
    default:
      return { status: 400, reason: 'Bad Request', code: 'validation_error', message: 'The request is not valid HTTP (request line, header or framing).' };
  }
}

/** How long a connection refused by the HTTP parser is drained after its answer before it is closed. */
const LINGER_MS = 2000;

/**
 * Answers what Node's HTTP parser refuses (bytes not allowed in the request line or a header,
 * headers over the size limit, broken framing) with the same error body, X-Request-Id and
 * Cache-Control as every other answer, then closes the connection.
 */
export function answerClientErrors(server: http.Server | https.Server): void {
  const answered = new WeakSet<Duplex>();
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // The parser reports again as the rest of a refused request arrives: the answer is out, and
    // the connection is draining (below); destroying it now would reset it and lose the answer.
    if (answered.has(socket)) return;
    // A response already on its way cannot be followed by another on the same connection.
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const refusal = parserRefusal(err.code);
    const requestId = newRequestId();
    const body = JSON.stringify({ error: refusal.message, code: refusal.code, request_id: requestId });
    const head = [
      `HTTP/1.1 ${refusal.status} ${refusal.reason}`,
      `X-Request-Id: ${requestId}`,
      'Cache-Control: no-store',
      'Content-Type: application/json; charset=utf-8',
      `Content-Length: ${Buffer.byteLength(body)}`,
      'Connection: close',
    ];
    answered.add(socket);
    socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
    // A lingering close: what the client still sends (the rest of an oversized request) is read
    // and dropped until it closes its side, for at most LINGER_MS. Closing with unread input
    // would make the kernel reset the connection, and the client would lose the answer above.
    socket.on('data', () => undefined);
    socket.once('end', () => socket.destroy());
    const linger = setTimeout(() => socket.destroy(), LINGER_MS);
    linger.unref();
    socket.once('close', () => clearTimeout(linger));
  });
}
