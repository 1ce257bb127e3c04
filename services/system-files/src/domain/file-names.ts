/**
 * Names of platform files: which directory takes which names and extensions. Pure rules, shared
 * by the upload (the file server) and the list/delete handlers.
 */

export const FILE_DIRS = ['files', 'firmware'] as const;
export type FileDir = (typeof FILE_DIRS)[number];

/** Letters, digits, `.`, `_` and `-`, starting with a letter or digit (no path, no hidden files). */
export const FILE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
export const FILE_NAME_MAX_LENGTH = 64;

/** Extensions each directory accepts, lower case; the comparison ignores case. */
export const ALLOWED_EXTENSIONS: Readonly<Record<FileDir, readonly string[]>> = {
  files: ['.mp3', '.wav', '.pem', '.crt', '.cer', '.der', '.txt', '.json'],
  firmware: ['.bin'],
};

export function isFileDir(value: unknown): value is FileDir {
  return typeof value === 'string' && (FILE_DIRS as readonly string[]).includes(value);
}

/** The extension in lower case with its dot (`.mp3`), or '' when the name has none. */
export function extensionOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot <= 0 ? '' : name.slice(dot).toLowerCase();
}

/** The last segment of a client's filename (browsers and tools may send a full path). */
export function baseName(filename: string): string {
  const parts = filename.split(/[/\\]/);
  return parts[parts.length - 1] ?? '';
}

/** Why `name` may not be stored in `dir`, or null when it may. */
export function uploadNameProblem(dir: FileDir, name: string): string | null {
  if (name.length === 0) return 'The file part has no filename.';
  if (name.length > FILE_NAME_MAX_LENGTH) return `The file name is longer than ${FILE_NAME_MAX_LENGTH} characters.`;
  if (!FILE_NAME_PATTERN.test(name)) return 'The file name may hold only letters, digits, ".", "_" and "-", and must start with a letter or digit.';
  const ext = extensionOf(name);
  const allowed = ALLOWED_EXTENSIONS[dir];
  if (!allowed.includes(ext)) {
    return dir === 'firmware'
      ? `firmware/ takes ${allowed.join(', ')} files only.`
      : `files/ takes ${allowed.join(', ')} files only${ext ? `, not ${ext}` : ''}.`;
  }
  return null;
}

/** An .mp3 in files/ gets the audio check before it is stored. */
export function needsAudioCheck(dir: FileDir, name: string): boolean {
  return dir === 'files' && extensionOf(name) === '.mp3';
}

/** Where a platform file's bytes live in the storage backend. */
export function storageKeyOf(dir: FileDir, name: string): string {
  return `${dir}/${name}`;
}

/** The protected names of a comma-separated setting (PROTECTED_FILE_NAMES), blanks dropped. */
export function parseProtectedNames(list: string): ReadonlySet<string> {
  return new Set(
    list
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0),
  );
}

/** A protected name may not be deleted, in files/ or firmware/ alike. */
export function isProtectedName(protectedNames: ReadonlySet<string>, name: string): boolean {
  return protectedNames.has(name);
}

/**
 * Where an upload's answer points (`Location`): the API has no route of one platform file, so
 * it is the list filtered to this file, `GET /v1/system/files?dir=<dir>&name=<name>`, which
 * answers `{files: [the file]}` (and `{files: []}` once it was deleted).
 */
export function fileLocation(dir: FileDir, name: string): string {
  return `/v1/system/files?dir=${encodeURIComponent(dir)}&name=${encodeURIComponent(name)}`;
}
