import { randomUUID } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { ApiError, type Logger } from '@fleet/service-kit';
import { docsRouter } from '../docs';
import { apiPipeline, type PipelineDeps } from './api-pipeline';
import { sendError } from './error-response';

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
  // Bodies are read raw so idempotency can fingerprint them and parse errors follow the permission check.
  app.use(express.raw({ type: () => true, limit: BODY_LIMIT }));
  app.use(asyncRoute(apiPipeline(deps)));
  app.use(errorHandler(deps.logger));
  return app;
}

/** X-Request-Id and Cache-Control on every response; one access log line per request. */
function conventions(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const requestId = `req_${randomUUID().replace(/-/g, '')}`;
    res.locals.requestId = requestId;
    res.setHeader('X-Request-Id', requestId);
    res.setHeader('Cache-Control', 'no-store');
    if (!logger.isLevelEnabled('info')) return next();
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      logger.info(
        { request_id: requestId, method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 10) / 10, key_prefix: res.locals.keyPrefix },
        'request',
      );
    });
    next();
  };
}

/** In production plain HTTP is refused unless a trusted proxy says the client used HTTPS. */
function httpsOnly(req: Request, res: Response, next: NextFunction): void {
  if (req.secure) return next();
  sendError(res, new ApiError(403, 'https_required', 'HTTPS is required.'));
}

function asyncRoute(handler: (req: Request, res: Response) => Promise<void>) {
  return (req: Request, res: Response, next: NextFunction): void => {
    handler(req, res).catch(next);
  };
}

function errorHandler(logger: Logger) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    let failure = err;
    const status = (err as { status?: number; type?: string }).status;
    const type = (err as { type?: string }).type;
    if (!(err instanceof ApiError) && type === 'entity.too.large') {
      failure = new ApiError(413, 'payload_too_large', `The body exceeds ${BODY_LIMIT}.`);
    } else if (!(err instanceof ApiError) && status === 400 && type) {
      failure = new ApiError(400, 'validation_error', 'The request body could not be read.');
    } else if (!(err instanceof ApiError)) {
      logger.error({ err, request_id: res.locals.requestId, path: req.path }, 'unhandled error');
    }
    if (res.headersSent) {
      res.end();
      return;
    }
    sendError(res, failure);
  };
}
