import http from 'node:http';
import https from 'node:https';
import type { Request, Response } from 'express';
import type { Principal } from '@fleet/contracts';
import { ApiError, chunkReclaimer, closeGently, fromEnvelopeError, ServiceUnavailableError, type Bus, type Logger } from '@fleet/service-kit';
import { routeId, type RouteDef } from '../routes/types';
import { sendError } from './error-response';


/** Multipart framing around the file part (boundaries, part headers, the dir field) a body may add to the file's size. */
export const MULTIPART_OVERHEAD_BYTES = 64 * 1024;

/** How long an upload may make no progress (either side) before it is abandoned. */
const IDLE_MS = 30_000;

/** How long a refused upload's connection still takes (and drops) what the client sends, so it can read the answer. */
const LINGER_MS = 2000;

const isMultipart = (contentType: string | undefined): boolean => /^multipart\/form-data\s*;\s*boundary=/i.test(contentType ?? '');

/**
 * A route whose body is streamed to the owning service (platform file upload): the permission
 * was checked by the caller; the owner answers a one-time URL (`system.upload.open`), the body
 * goes there as sent, piped (never buffered, so a 32 MB file costs the gateway a few socket
 * buffers), and the owner's answer is relayed. A body declared larger than the owner accepts is
 * 413 at once; one that turns out larger is cut by the owner, whose 413 is relayed at once too.
 */
export async function relayUpload(deps: { bus: Bus; logger: Logger }, req: Request, res: Response, route: RouteDef, principal: Principal, requestId: string): Promise<void> {
  if (!('upload' in route.target)) throw new TypeError(`${routeId(route)} does not stream its body`);
  if (!isMultipart(req.get('Content-Type'))) {
    throw new ApiError(415, 'unsupported_media_type', 'Send the file as multipart/form-data (fields `dir`, then `file`).');
  }
  const reply = await deps.bus.request(route.target.upload, { request_id: requestId, route: routeId(route), principal, params: {}, query: {} });
  if (!reply.ok) throw fromEnvelopeError(reply.error);
  if (!reply.body) throw new ServiceUnavailableError();
  const { url, max_bytes: maxBytes } = reply.body;
  const declared = Number(req.get('Content-Length') ?? Number.NaN);
  if (Number.isFinite(declared) && declared > maxBytes + MULTIPART_OVERHEAD_BYTES) {
    refuseAtOnce(req, res, new ApiError(413, 'payload_too_large', `The file exceeds ${maxBytes} bytes.`));
    return;
  }
  await pipeTo(url, req, res, requestId, deps.logger);
}

function pipeTo(url: string, req: Request, res: Response, requestId: string, logger: Logger): Promise<void> {
  return new Promise((resolve) => {
    const target = new URL(url);
    const headers: http.OutgoingHttpHeaders = { 'content-type': req.get('Content-Type'), 'x-request-id': requestId };
    const length = req.get('Content-Length');
    if (length !== undefined) headers['content-length'] = length;
    else headers['transfer-encoding'] = 'chunked';
    const client = target.protocol === 'https:' ? https : http;
    let settled = false;
    const done = () => {
      if (!settled) {
        settled = true;
        resolve();
      }
    };
    const upstream = client.request(target, { method: 'POST', headers, timeout: IDLE_MS }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (c: Buffer) => chunks.push(c));
      answer.on('error', () => failed(new ServiceUnavailableError()));
      answer.on('end', () => {
        const status = answer.statusCode ?? 502;
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          failed(new ServiceUnavailableError());
          return;
        }
        if (typeof answer.headers.location === 'string') res.setHeader('Location', answer.headers.location);
        // A 503 (or 429) of the file server says when to retry, as every such answer of the gateway does.
        if (typeof answer.headers['retry-after'] === 'string') res.setHeader('Retry-After', answer.headers['retry-after']);
        if (req.complete) {
          res.status(status).json(body);
        } else {
          // Answered before the whole body arrived (too large, a name clash): the rest is not read.
          req.unpipe(upstream);
          answerAndLinger(req, res, () => res.status(status).json(body));
        }
        done();
      });
    });
    const failed = (err: ApiError) => {
      if (settled) return;
      req.unpipe(upstream);
      upstream.destroy();
      logger.warn({ request_id: requestId, code: err.code }, 'upload not relayed');
      if (!res.headersSent) answerAndLinger(req, res, () => sendError(res, err));
      done();
    };
    upstream.on('timeout', () => failed(new ServiceUnavailableError('The upload made no progress; retry.')));
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      // The owner answered and closed while the body was still flowing: its answer is on its way.
      if (err.code === 'EPIPE' || err.code === 'ECONNRESET') setTimeout(() => failed(new ServiceUnavailableError()), 1000).unref();
      else failed(new ServiceUnavailableError());
    });
    req.on('aborted', () => {
      upstream.destroy();
      done();
    });
    const reclaim = chunkReclaimer();
    req.on('data', (chunk: Buffer) => reclaim(chunk.length));
    req.pipe(upstream);
  });
}

function refuseAtOnce(req: Request, res: Response, failure: ApiError): void {
  answerAndLinger(req, res, () => sendError(res, failure));
}

/**
 * Answers now, with Connection: close, while the client may still be sending: what it sends
 * next is dropped unread for at most LINGER_MS, then the connection closes (closeGently).
 * Closing at once with unread input would make the kernel reset the connection and the client
 * lose the answer.
 */
function answerAndLinger(req: Request, res: Response, answer: () => void): void {
  res.setHeader('Connection', 'close');
  if (!req.complete) {
    closeGently(req.socket, { graceMs: LINGER_MS, drain: true });
    req.on('data', () => undefined);
    req.resume();
  }
  answer();
}
