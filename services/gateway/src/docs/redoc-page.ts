import { cspHash, escapeHtml, jsonForScript } from './html';

/** Redoc options: search on, system fonts only (nothing fetched from font services). */
export const REDOC_OPTIONS = {
  disableSearch: false,
  expandResponses: '200,201,202,204',
  requiredPropsFirst: true,
  jsonSampleExpandLevel: 3,
  hideDownloadButtons: false,
  theme: {
    typography: {
      fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif',
      headings: { fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif' },
      code: { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace' },
    },
  },
} as const;

const SPEC_ELEMENT_ID = 'openapi-document';
const CONTAINER_ID = 'redoc-container';

/** The one inline script: reads the embedded document and starts Redoc. Allowed by its hash. */
const INIT_SCRIPT = `(function () {
  var spec = JSON.parse(document.getElementById(${JSON.stringify(SPEC_ELEMENT_ID)}).textContent);
  var options = ${JSON.stringify(REDOC_OPTIONS)};
  var container = document.getElementById(${JSON.stringify(CONTAINER_ID)});
  if (typeof Redoc === 'undefined') {
    container.textContent = 'The reference viewer could not be loaded. The machine-readable description is at /openapi.json.';
    return;
  }
  Redoc.init(spec, options, container);
})();`;

const BASE_STYLE = 'body{margin:0;padding:0}';

/**
 * CSP of the reference page. Redoc is a same-origin script; it injects inline styles
 * (styled-components), runs its search index in a blob: worker, and the download button
 * links a blob: URL. Nothing is loaded from another origin.
 */
export const REFERENCE_PAGE_CSP = [
  "default-src 'none'",
  `script-src 'self' ${cspHash(INIT_SCRIPT)}`,
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src blob:",
  "child-src blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

/** The full reference page (Redoc), with the OpenAPI document embedded so it works offline. */
export function renderReference(document: Record<string, unknown>, urls: { bundle: string; openapi: string }): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Partner Device API: reference</title>
<style>${BASE_STYLE}</style>
</head>
<body>
<noscript><p>The reference needs JavaScript. The machine-readable description is at <a href="${escapeHtml(urls.openapi)}">${escapeHtml(urls.openapi)}</a>.</p></noscript>
<div id="${CONTAINER_ID}"></div>
<script id="${SPEC_ELEMENT_ID}" type="application/json">${jsonForScript(document)}</script>
<script src="${escapeHtml(urls.bundle)}"></script>
<script>${INIT_SCRIPT}</script>
</body>
</html>
`;
}
