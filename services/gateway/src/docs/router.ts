import { basename, dirname } from 'node:path';
import { Router, type Request, type Response } from 'express';
import { ApiError } from '@fleet/service-kit';
import { renderChangelog } from './changelog-page';
import { renderGuide } from './guide';
import { STATIC_PAGE_CSP } from './html';
import { REFERENCE_PAGE_CSP, renderReference } from './redoc-page';

/** Paths the docs router answers; none needs an API key. */
export const DOCS_PATHS = {
  openapi: '/openapi.json',
  guide: '/docs',
  reference: '/docs_adv',
  redocBundle: '/docs_adv/redoc.standalone.js',
  changelog: '/changelog',
} as const;

// Served relative to its own folder: the resolved path sits under node_modules/.pnpm, and
// send() refuses dot-folders anywhere in an absolute path.
const REDOC_BUNDLE_FILE = require.resolve('redoc/bundles/redoc.standalone.js');
const REDOC_BUNDLE_DIR = dirname(REDOC_BUNDLE_FILE);
const REDOC_BUNDLE_NAME = basename(REDOC_BUNDLE_FILE);
const REDOC_VERSION = (require('redoc/package.json') as { version: string }).version;
const ONE_YEAR_S = 365 * 24 * 60 * 60;

const HOST_RE = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

function setHtmlHeaders(res: Response, csp: string): void {
  res.set({
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Security-Policy': csp,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cache-Control': 'no-cache',
  });
}

/**
 * The API's base URL as partners should use it: the document's server URL when absolute,
 * otherwise the scheme and host that served this page plus the server path. The scheme is the
 * one the gateway actually serves: https in production (where plain HTTP is refused, and
 * behind a trusted proxy express reads X-Forwarded-Proto), http on a local fleet without TLS.
 */
function baseUrlFor(document: Record<string, unknown>, req: Request): string {
  const servers = document.servers;
  const first: unknown = Array.isArray(servers) ? servers[0] : undefined;
  const url = first !== null && typeof first === 'object' && 'url' in first && typeof first.url === 'string' ? first.url : '/';
  if (/^https?:\/\//i.test(url)) return url.replace(/\/+$/, '');
  const host = req.get('host');
  const scheme = req.protocol === 'http' ? 'http' : 'https';
  const origin = host !== undefined && HOST_RE.test(host) ? `${scheme}://${host}` : `${scheme}://<base URL>`;
  return `${origin}${url.startsWith('/') ? url : `/${url}`}`.replace(/\/+$/, '');
}

/**
 * Public documentation: the OpenAPI document, the quick-start guide, the Redoc reference
 * (fully offline: the bundle is served from here and the document is embedded) and the
 * changelog. Mount it before /v1 authentication; it answers only the DOCS_PATHS.
 */
export function docsRouter(getDocument: () => Record<string, unknown>): Router {
  const router = Router();
  const referenceCache = new WeakMap<object, Map<string, string>>();

  const links = (req: Request) => ({
    guide: `${req.baseUrl}${DOCS_PATHS.guide}`,
    reference: `${req.baseUrl}${DOCS_PATHS.reference}`,
    openapi: `${req.baseUrl}${DOCS_PATHS.openapi}`,
    changelog: `${req.baseUrl}${DOCS_PATHS.changelog}`,
    bundle: `${req.baseUrl}${DOCS_PATHS.redocBundle}?v=${encodeURIComponent(REDOC_VERSION)}`,
  });

  router.get(DOCS_PATHS.openapi, (_req, res) => {
    res.set({
      'Cache-Control': 'no-cache',
      'Access-Control-Allow-Origin': '*',
      'X-Content-Type-Options': 'nosniff',
    });
    res.json(getDocument());
  });

  router.get(DOCS_PATHS.guide, (req, res) => {
    const l = links(req);
    setHtmlHeaders(res, STATIC_PAGE_CSP);
    res.send(renderGuide(baseUrlFor(getDocument(), req), { reference: l.reference, openapi: l.openapi, changelog: l.changelog }));
  });

  router.get(DOCS_PATHS.reference, (req, res) => {
    const document = getDocument();
    const l = links(req);
    let byBase = referenceCache.get(document);
    if (!byBase) referenceCache.set(document, (byBase = new Map()));
    let html = byBase.get(req.baseUrl);
    if (html === undefined) {
      html = renderReference(document, { bundle: l.bundle, openapi: l.openapi });
      byBase.set(req.baseUrl, html);
    }
    setHtmlHeaders(res, REFERENCE_PAGE_CSP);
    res.send(html);
  });

  router.get(DOCS_PATHS.redocBundle, (_req, res, next) => {
    // Set explicitly: send() keeps a Cache-Control an earlier middleware already set (e.g. no-store).
    res.set({ 'Cache-Control': `public, max-age=${ONE_YEAR_S}, immutable`, 'X-Content-Type-Options': 'nosniff' });
    res.sendFile(REDOC_BUNDLE_NAME, { root: REDOC_BUNDLE_DIR }, (err) => {
      if (err) next(err);
    });
  });

  router.get(DOCS_PATHS.changelog, (req, res) => {
    const l = links(req);
    setHtmlHeaders(res, STATIC_PAGE_CSP);
    res.send(renderChangelog({ guide: l.guide, reference: l.reference }));
  });

  // The documents are read-only: another method on their paths is 405, as on the API's routes.
  router.all(Object.values(DOCS_PATHS), (req, res, next) => {
    res.setHeader('Allow', 'GET, HEAD');
    next(new ApiError(405, 'method_not_allowed', `${req.method} is not allowed here; allowed: GET, HEAD.`));
  });

  return router;
}
