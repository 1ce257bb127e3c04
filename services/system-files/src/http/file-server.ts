import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { pipeline } from 'node:stream/promises';
import { ApiError, chunkReclaimer, closeGently, isStoreOutage, type Logger } from '@fleet/service-kit';
import type { SystemConfig } from '../config';
import type { AudioVerdict } from '../domain/audio';
import { fileLocation } from '../domain/file-names';
import type { UrlTokens, TokenProblem } from '../domain/signed-urls';
import { LocalFileStorage } from '../storage/local';
import type { FileStorage } from '../storage/storage';
import { findFile } from '../store/files';
import type { SystemDb } from '../store/prisma';
import { PayloadTooLargeError, sweepScratch, UploadAbortedError, uploadFile } from '../use-cases/upload-file';

/**
 * system-files' file server (node:http):
 *
 * - `POST /uploads/<ticket>`: the gateway streams a partner's multipart upload here, with the
 *   partner's Content-Type and X-Request-Id, after asking system.upload.open for the URL. The
 *   ticket (signed, about a minute, one use) names the partner and the request. Answers 201
 *   with the Platform file and `Location` (the file list filtered to it: fileLocation), or
 *   `{error, code, request_id}`: 400 validation_error, 403 forbidden (bad, expired or reused
 *   ticket), 409 conflict, 413 payload_too_large, 415 unsupported_media_type, 503
 *   service_unavailable. An answer given before the body was read through (413, a bad name, a
 *   clash, a bad ticket) carries `Connection: close`, and the connection closes a moment after it
 *   is sent (closeAfter): the rest of the body is never read.
 * - `GET|HEAD /d/<token>`: a device downloads a platform file by its signed URL; 403 when the
 *   token is invalid or expired, 404 when the file is gone. The bytes stream from the storage
 *   backend with Content-Length.
 */

export interface FileServerOptions {
  config: Pick<SystemConfig, 'FILES_HTTP_PORT' | 'FILES_HTTP_HOST' | 'UPLOAD_MAX_BYTES'>;
  db: SystemDb;
  storage: FileStorage;
  tokens: UrlTokens;
  logger: Logger;
  /** Where uploads are received; default: inside the local storage directory (so storing is a link), else the OS temp directory. */
  tempDir?: string;
  /** The audio check of uploaded .mp3 files; the domain's checkMp3File by default. */
  audioCheck?: (filePath: string, name: string) => Promise<AudioVerdict>;
  /** Called when a download starts (a transfer id is present with corr_mode url_token). */
  onDownload?: (download: { dir: string; name: string; transferId?: string }) => void;
}

export interface FileServer {
  /** The port it listens on (FILES_HTTP_PORT, or the one picked when that is 0). */
  readonly port: number;
  readonly server: Server;
  /** Stops accepting connections and resolves once open requests ended (cut after `graceMs`, default 10 s). */
  close(graceMs?: number): Promise<void>;
}

/** Scratch directories older than this are left from a crash. */
const STALE_SCRATCH_MS = 60 * 60 * 1000;
/** How long a whole upload request may take (a slow partner link streams 32 MB). */
const REQUEST_TIMEOUT_MS = 15 * 60 * 1000;
/** How long a refused upload's connection stays open, unread, for the gateway to read the answer. */
const CLOSE_GRACE_MS = 2000;

/** Starts the file server on FILES_HTTP_HOST:FILES_HTTP_PORT. */
export async function startFileServer(options: FileServerOptions): Promise<FileServer> {
  const tempDir = options.tempDir ?? (options.storage instanceof LocalFileStorage ? options.storage.incomingDir : tmpdir());
  const swept = await sweepScratch(tempDir, STALE_SCRATCH_MS);
  if (swept > 0) options.logger.info({ swept, tempDir }, 'removed upload scratch directories left by an earlier run');
  const usedTickets = new UsedTickets();
  const server = createServer({ requestTimeout: REQUEST_TIMEOUT_MS }, (req, res) => {
    void route(options, tempDir, usedTickets, req, res).catch((err: unknown) => {
      options.logger.error({ err }, 'file server request failed');
      if (!res.headersSent) sendError(res, requestIdOf(req), new ApiError(500, 'internal_error', 'Internal error.'));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.config.FILES_HTTP_PORT, options.config.FILES_HTTP_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  options.logger.info({ port, host: options.config.FILES_HTTP_HOST, storage: options.storage.kind }, 'file server listening');
  return {
    port,
    server,
    close: (graceMs = 10_000) =>
      new Promise<void>((resolve) => {
        const cut = setTimeout(() => server.closeAllConnections(), graceMs);
        cut.unref();
        // Connections whose request ends during the grace period close then, not at their keep-alive timeout.
        const sweep = setInterval(() => server.closeIdleConnections(), 100);
        sweep.unref();
        server.close(() => {
          clearTimeout(cut);
          clearInterval(sweep);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}

async function route(options: FileServerOptions, tempDir: string, usedTickets: UsedTickets, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://files.invalid');
  const upload = /^\/uploads\/([^/]+)$/.exec(url.pathname);
  if (upload) {
    if (req.method !== 'POST') return refuseMethod(req, res, 'POST');
    return receiveUpload(options, tempDir, usedTickets, upload[1] ?? '', req, res);
  }
  const download = /^\/d\/([^/]+)$/.exec(url.pathname);
  if (download) {
    if (req.method !== 'GET' && req.method !== 'HEAD') return refuseMethod(req, res, 'GET, HEAD');
    return serveDownload(options, download[1] ?? '', req, res);
  }
  closeAfter(req, res);
  sendError(res, requestIdOf(req), new ApiError(404, 'not_found', 'No such resource.'));
}

async function receiveUpload(options: FileServerOptions, tempDir: string, usedTickets: UsedTickets, ticket: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const headerId = requestIdOf(req);
  const verified = options.tokens.verifyUploadTicket(ticket);
  if (!verified.ok) return refuseEarly(req, res, headerId, new ApiError(403, 'forbidden', ticketMessage(verified.problem)));
  const requestId = typeof req.headers['x-request-id'] === 'string' ? headerId : verified.claims.requestId;
  if (!usedTickets.claim(ticket, verified.claims.expiresAt)) return refuseEarly(req, res, requestId, new ApiError(403, 'forbidden', 'The upload ticket was used already.'));
  const max = options.config.UPLOAD_MAX_BYTES;
  const declared = Number(req.headers['content-length']);
  // The multipart framing around the file takes a few hundred bytes; 64 KiB is ample.
  if (Number.isFinite(declared) && declared > max + 64 * 1024) return refuseEarly(req, res, requestId, new PayloadTooLargeError(max));

  const logger = options.logger.child({ request_id: requestId, partner_id: verified.claims.partnerId });
  const abandoned = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abandoned.abort();
  });
  try {
    const file = await uploadFile(
      { db: options.db, storage: options.storage, logger, maxBytes: max, tempDir, ...(options.audioCheck ? { audioCheck: options.audioCheck } : {}) },
      { headers: req.headers, body: req, signal: abandoned.signal, onBytes: chunkReclaimer() },
    );
    logger.info({ dir: file.dir, name: file.name, size: file.size }, 'platform file uploaded');
    sendJson(res, 201, requestId, file, { Location: fileLocation(file.dir, file.name) });
  } catch (err) {
    if (err instanceof UploadAbortedError) {
      logger.info('upload abandoned by its sender');
      res.destroy();
      return;
    }
    // A refused upload closes its connection: whatever of the body is still unread stays unread.
    closeAfter(req, res);
    sendError(res, requestId, toApiError(err, logger));
  }
}

async function serveDownload(options: FileServerOptions, token: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const requestId = requestIdOf(req);
  const verified = options.tokens.verifyDownload(token);
  if (!verified.ok) return sendError(res, requestId, new ApiError(403, 'forbidden', downloadMessage(verified.problem)));
  const { dir, name, transferId } = verified.claims;
  try {
    const row = await findFile(options.db, dir, name);
    if (!row) return sendError(res, requestId, new ApiError(404, 'not_found', `${dir}/${name} no longer exists.`));
    const body = await options.storage.open(row.storageKey);
    res.writeHead(200, {
      'Content-Type': 'application/octet-stream',
      'Content-Length': String(row.size),
      'Content-Disposition': `attachment; filename="${row.name}"`,
      ETag: `"${row.sha256}"`,
      'Cache-Control': 'private, no-store',
      'X-Request-Id': requestId,
    });
    options.onDownload?.({ dir, name, ...(transferId ? { transferId } : {}) });
    if (req.method === 'HEAD') {
      body.destroy();
      res.end();
      return;
    }
    await pipeline(body, res).catch((err: unknown) => {
      // The device hung up, or storage failed midway: the connection is cut, the device sees a short body.
      options.logger.warn({ err, request_id: requestId, dir, name }, 'download cut short');
    });
  } catch (err) {
    sendError(res, requestId, toApiError(err, options.logger.child({ request_id: requestId })));
  }
}

/** A refusal before any of the body was read: the body is never read, the connection closes after the answer. */
function refuseEarly(req: IncomingMessage, res: ServerResponse, requestId: string, err: ApiError): void {
  closeAfter(req, res);
  sendError(res, requestId, err);
}

function refuseMethod(req: IncomingMessage, res: ServerResponse, allow: string): void {
  closeAfter(req, res);
  res.setHeader('Allow', allow);
  sendError(res, requestIdOf(req), new ApiError(405, 'method_not_allowed', `Use ${allow}.`));
}

/**
 * Answers with `Connection: close` and closes the connection once the answer is out, leaving the
 * rest of the body unread. The close waits CLOSE_GRACE_MS with nothing more read (closeGently):
 * closing at once with the body still arriving would reset the connection, and the gateway,
 * still piping the body, could lose the answer.
 */
function closeAfter(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader('Connection', 'close');
  if (!req.complete) closeGently(req.socket, { graceMs: CLOSE_GRACE_MS, drain: false });
}

function toApiError(err: unknown, logger: Logger): ApiError {
  if (err instanceof ApiError) {
    if (err.status >= 500) logger.warn({ err }, 'file server answered a server error');
    return err;
  }
  if (isStoreOutage(err)) return new ApiError(503, 'service_unavailable', 'The service is temporarily unavailable; retry shortly.', { retryAfter: 1 });
  logger.error({ err }, 'file server request failed');
  return new ApiError(500, 'internal_error', 'Internal error.');
}

function sendError(res: ServerResponse, requestId: string, err: ApiError): void {
  const headers: Record<string, string> = {};
  if (err.options.retryAfter !== undefined) headers['Retry-After'] = String(err.options.retryAfter);
  sendJson(res, err.status, requestId, { error: err.message, code: err.code, request_id: requestId }, headers);
}

function sendJson(res: ServerResponse, status: number, requestId: string, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(text)), 'X-Request-Id': requestId });
  res.end(text);
}

/** The gateway's X-Request-Id, or a new id (device downloads). */
function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && /^[\x21-\x7e]{1,128}$/.test(given) ? given : randomUUID();
}

function ticketMessage(problem: TokenProblem): string {
  return problem === 'expired' ? 'The upload ticket expired; ask for a new one.' : 'The upload ticket is not valid.';
}

function downloadMessage(problem: TokenProblem): string {
  return problem === 'expired' ? 'This download URL has expired.' : 'This download URL is not valid.';
}

/**
 * Upload tickets already presented to this process, until they expire: a ticket opens one
 * upload. Other replicas keep their own lists, so with several this only narrows a replay.
 */
class UsedTickets {
  private readonly seen = new Map<string, number>();

  claim(ticket: string, expiresAt: number): boolean {
    const now = Math.floor(Date.now() / 1000);
    if (this.seen.size > 1000) for (const [t, exp] of this.seen) if (exp <= now) this.seen.delete(t);
    if (this.seen.has(ticket)) return false;
    this.seen.set(ticket, expiresAt);
    return true;
  }
}
