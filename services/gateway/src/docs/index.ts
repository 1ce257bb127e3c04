export { docsRouter, DOCS_PATHS } from './router';
export { CHANGELOG } from './changelog';
export type { ChangelogEntry } from './changelog';
