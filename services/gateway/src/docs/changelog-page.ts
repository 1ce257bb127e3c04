import { CHANGELOG, type ChangelogEntry } from './changelog';
import { escapeHtml, inlineCode, page } from './html';

/** The changelog page, served at /changelog. */
export function renderChangelog(links: { guide: string; reference: string }, entries: readonly ChangelogEntry[] = CHANGELOG): string {
  const sections = entries
    .map(
      (entry) => `<section id="v${escapeHtml(entry.version)}">
<h2>${escapeHtml(entry.version)} <small>(<time datetime="${escapeHtml(entry.date)}">${escapeHtml(entry.date)}</time>)</small></h2>
<ul>
${entry.changes.map((change) => `<li>${inlineCode(change)}</li>`).join('\n')}
</ul>
</section>`,
    )
    .join('\n');
  const body = `<header>
<h1>Partner Device API: changelog</h1>
<p>Every change to <code>/v1</code>, newest first. <code>/v1</code> only gains routes, optional parameters, fields and error codes; removals are deprecated first, at least six months before sunset.</p>
<nav aria-label="Documentation"><ul><li><a href="${escapeHtml(links.guide)}">Quick start</a></li><li><a href="${escapeHtml(links.reference)}">API reference</a></li></ul></nav>
</header>
<main>
${sections}
</main>`;
  return page('Partner Device API: changelog', body);
}
