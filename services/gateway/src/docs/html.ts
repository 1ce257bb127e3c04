import { createHash } from 'node:crypto';

/** Escapes text for HTML element content and double-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Escapes text, then renders `backtick` spans as <code>. */
export function inlineCode(text: string): string {
  return escapeHtml(text).replace(/`([^`]+)`/g, '<code>$1</code>');
}

/**
 * JSON that is safe inside a <script> element: `<`, `>` and `&` are written as \u escapes
 * (so neither `</script>` nor `<!--` can appear), as are U+2028 and U+2029. JSON.parse and
 * JavaScript both read the escapes back as the same characters.
 */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/** The CSP source expression for an inline <script> or <style> with exactly this text. */
export function cspHash(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
}

/** The stylesheet of the guide and the changelog (inline, allowed by its hash). */
export const PAGE_CSS = `
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #57606a; --bg: #ffffff; --line: #d0d7de; --code-bg: #f3f4f6; --accent: #0b5cad; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9aa4af; --bg: #0d1117; --line: #30363d; --code-bg: #161b22; --accent: #6cb6ff; } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 16px/1.6 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header, main, footer { max-width: 56rem; margin: 0 auto; padding: 0 1.25rem; }
header { padding-top: 2rem; }
header p { color: var(--muted); margin-top: 0; }
nav ul { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 0.25rem 1rem; }
h1 { font-size: 2rem; line-height: 1.2; margin: 0 0 0.5rem; }
h2 { font-size: 1.45rem; margin: 2.5rem 0 0.75rem; padding-top: 0.5rem; border-top: 1px solid var(--line); }
h3 { font-size: 1.1rem; margin: 1.5rem 0 0.5rem; }
a { color: var(--accent); }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 0.9em; }
code { background: var(--code-bg); padding: 0.1em 0.3em; border-radius: 4px; }
pre { background: var(--code-bg); padding: 0.9rem 1rem; border-radius: 6px; overflow-x: auto; line-height: 1.45; }
pre code { background: none; padding: 0; }
table { border-collapse: collapse; width: 100%; margin: 0.75rem 0 1.25rem; font-size: 0.95em; }
th, td { text-align: left; vertical-align: top; padding: 0.4rem 0.6rem; border: 1px solid var(--line); }
th { background: var(--code-bg); }
.note { border-left: 4px solid var(--accent); padding: 0.25rem 0 0.25rem 1rem; margin: 1rem 0; }
footer { margin-top: 3rem; padding-top: 1rem; padding-bottom: 2rem; border-top: 1px solid var(--line); color: var(--muted); font-size: 0.9em; }
`;

export const PAGE_CSS_HASH = cspHash(PAGE_CSS);

/** CSP of the guide and the changelog: no scripts at all, only the inline stylesheet. */
export const STATIC_PAGE_CSP = [
  "default-src 'none'",
  `style-src ${PAGE_CSS_HASH}`,
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** A complete HTML page around `body` with the shared stylesheet. */
export function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<style>${PAGE_CSS}</style>
</head>
<body>
${body}
</body>
</html>
`;
}
