import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, open, readdir, rm, stat } from 'node:fs/promises';
import type { IncomingHttpHeaders } from 'node:http';
import path from 'node:path';
import { Transform, type Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import { ApiError, ConflictError, isStoreOutage, ServiceUnavailableError, ValidationError, type Logger } from '@fleet/service-kit';
import { checkMp3File, type AudioCheck, type AudioVerdict } from '../domain/audio';
import { baseName, isFileDir, needsAudioCheck, storageKeyOf, uploadNameProblem, type FileDir } from '../domain/file-names';
import type { FileStorage } from '../storage/storage';
import { findFile, insertFile, type PlatformFileRow } from '../store/files';
import type { SystemDb } from '../store/prisma';

/**
 * A platform file upload (POST /v1/system/files), received as the partner's multipart body
 * streamed by the gateway: a `dir` field (files | firmware) and one `file` part.
 *
 * The file part goes straight to a scratch file while its SHA-256 and size are computed; the
 * body is never held in memory. The moment the file passes the size limit the upload fails
 * (413) without reading further. When `dir` comes before the file, the name is checked as the
 * file part starts, so a bad name (400) or a name clash (409) is refused without reading it.
 *
 * Storing, and why a crash never blocks a name for good:
 *  1. one transaction inserts the record (the (dir, name) primary key: a taken name is 409;
 *     a concurrent upload of the same name waits for this transaction, then sees it taken);
 *  2. inside it, storage.putNew writes the bytes exclusively. Since this transaction holds the
 *     name, an object found under the key belongs to no record: it was left by an upload whose
 *     commit failed (or by a crash), and is replaced;
 *  3. the commit makes the file visible, bytes already in place.
 * A failure before the commit leaves at most such an ownerless object, which the next upload
 * of that name replaces and which downloads never serve (they need the record). Deletes take
 * the same record lock while removing the bytes (handlers/files.ts), so the two never race.
 */

export interface UploadDeps {
  db: SystemDb;
  storage: FileStorage;
  logger: Logger;
  /** Largest file accepted (UPLOAD_MAX_BYTES). */
  maxBytes: number;
  /** Where bodies are received: one scratch directory per upload, removed afterwards. */
  tempDir: string;
  /** The audio check of an .mp3 in files/ (the domain's checkMp3File). */
  audioCheck?: (filePath: string, name: string) => Promise<AudioVerdict>;
  /** Longest the store step (record plus storage write) may keep its transaction open. */
  commitTimeoutMs?: number;
}

export interface UploadInput {
  headers: IncomingHttpHeaders;
  body: Readable;
  /** Aborted when the sender went away: the upload stops and nothing is committed after. */
  signal?: AbortSignal;
  /** Told the size of every chunk of the body as it is read (the file server reclaims them: chunkReclaimer). */
  onBytes?: (bytes: number) => void;
}

/** The Platform file resource. */
export interface PlatformFileBody {
  dir: FileDir;
  name: string;
  size: number;
  sha256: string;
  modified_at: string;
  audio?: AudioCheck;
}

/** The file is over the limit: 413, answered as soon as the limit is passed. */
export class PayloadTooLargeError extends ApiError {
  constructor(maxBytes: number) {
    super(413, 'payload_too_large', `The file is larger than ${maxBytes} bytes (${formatMegabytes(maxBytes)}).`);
  }
}

/** The upload's sender went away; nobody reads the answer. */
export class UploadAbortedError extends Error {
  constructor() {
    super('the upload was abandoned by its sender');
    this.name = 'UploadAbortedError';
  }
}

/** Prefix of the per-upload scratch directories (swept at start when a crash left some). */
export const SCRATCH_PREFIX = 'fleet-upload-';
const DEFAULT_COMMIT_TIMEOUT_MS = 120_000;

/** The resource form of a stored file. */
export function platformFileBody(row: PlatformFileRow): PlatformFileBody {
  return {
    dir: row.dir,
    name: row.name,
    size: row.size,
    sha256: row.sha256,
    modified_at: row.modifiedAt.toISOString(),
    ...(row.audio ? { audio: row.audio as AudioCheck } : {}),
  };
}

/** Receives, checks and stores one upload; throws ApiErrors (400, 409, 413, 415, 503). */
export async function uploadFile(deps: UploadDeps, input: UploadInput): Promise<PlatformFileBody> {
  const contentType = String(input.headers['content-type'] ?? '');
  if (!/^multipart\/form-data\s*;/i.test(contentType)) {
    throw new ApiError(415, 'unsupported_media_type', 'Send the file as multipart/form-data with a boundary.');
  }
  await mkdir(deps.tempDir, { recursive: true });
  const scratch = await mkdtemp(path.join(deps.tempDir, SCRATCH_PREFIX));
  const receiver = new Receiver(deps, input, path.join(scratch, 'body'));
  try {
    const file = await receiver.done;
    if (await findFile(deps.db, file.dir, file.name)) throw conflict(file.dir, file.name);
    const audio = needsAudioCheck(file.dir, file.name) ? await checkAudio(deps, file.path, file.name) : null;
    const row = await store(deps, input.signal, { ...file, audio });
    return platformFileBody(row);
  } finally {
    await receiver.settled();
    await rm(scratch, { recursive: true, force: true }).catch((err: unknown) => deps.logger.warn({ err, scratch }, 'removing an upload scratch directory failed'));
  }
}

/** Removes scratch directories older than `olderThanMs` (left by a crash); a missing directory is fine. */
export async function sweepScratch(tempDir: string, olderThanMs: number, now = Date.now()): Promise<number> {
  let removed = 0;
  const entries = await readdir(tempDir).catch(() => [] as string[]);
  for (const entry of entries) {
    if (!entry.startsWith(SCRATCH_PREFIX)) continue;
    const full = path.join(tempDir, entry);
    const info = await stat(full).catch(() => undefined);
    if (!info || now - info.mtimeMs < olderThanMs) continue;
    await rm(full, { recursive: true, force: true });
    removed += 1;
  }
  return removed;
}

interface ReceivedFile {
  dir: FileDir;
  name: string;
  /** The scratch file holding the bytes. */
  path: string;
  size: number;
  sha256: string;
}

/**
 * Parses one multipart body, writing the file part to `filePath`. `done` resolves once the
 * whole body is read and the file is on disk, or rejects at the first problem; from then on
 * nothing more is read from the body.
 */
class Receiver {
  readonly done: Promise<ReceivedFile>;
  private writing: Promise<{ size: number; sha256: string }> | undefined;
  private finished = false;
  private resolve!: (file: ReceivedFile) => void;
  private reject!: (err: unknown) => void;
  private parser: busboy.Busboy | undefined;
  private fileStream: Readable | undefined;
  private sink: Writable | undefined;
  private dir: FileDir | undefined;
  private fileName: string | undefined;

  constructor(
    private readonly deps: UploadDeps,
    private readonly input: UploadInput,
    private readonly filePath: string,
  ) {
    this.done = new Promise<ReceivedFile>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.start();
  }

  /** Resolves once the scratch file is closed, whatever happened. */
  async settled(): Promise<void> {
    await this.writing?.catch(() => undefined);
  }

  private start(): void {
    const { body, signal } = this.input;
    if (signal?.aborted) return this.fail(new UploadAbortedError());
    signal?.addEventListener('abort', () => this.fail(new UploadAbortedError()), { once: true });
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: this.input.headers,
        // fileSize one past the limit: busboy signals 'limit' on reaching it, and a file of exactly maxBytes is fine.
        limits: { fileSize: this.deps.maxBytes + 1, files: 1, fields: 16, fieldSize: 1024, parts: 32, headerPairs: 32 },
      });
    } catch (err) {
      return this.fail(new ValidationError(`The multipart body cannot be read: ${messageOf(err)}.`));
    }
    this.parser = parser;
    parser.on('field', (field, value, info) => this.onField(field, value, info.valueTruncated));
    parser.on('file', (field, stream, info) => this.onFile(field, stream, info.filename));
    parser.on('filesLimit', () => this.fail(new ValidationError('Send one `file` part only.')));
    parser.on('fieldsLimit', () => this.fail(new ValidationError('The form has too many fields.')));
    parser.on('partsLimit', () => this.fail(new ValidationError('The form has too many parts.')));
    parser.on('error', (err: unknown) => this.fail(new ValidationError(`The multipart body is malformed: ${messageOf(err)}.`)));
    parser.on('close', () => void this.onClose());
    body.on('error', () => this.fail(new UploadAbortedError()));
    const { onBytes } = this.input;
    if (onBytes) body.on('data', (chunk: Buffer) => onBytes(chunk.length));
    body.pipe(parser);
  }

  private onField(field: string, value: string, truncated: boolean): void {
    if (field === 'file') return this.fail(new ValidationError('`file` must be a file part (with a filename), not a text field.'));
    if (field !== 'dir') return; // other fields are ignored
    if (this.dir !== undefined) return this.fail(new ValidationError('Send `dir` once.'));
    if (truncated || !isFileDir(value)) return this.fail(new ValidationError('`dir` must be files or firmware.'));
    this.dir = value;
  }

  private onFile(field: string, stream: Readable, filename: string | undefined): void {
    if (this.finished) {
      stream.resume();
      return;
    }
    if (field !== 'file') {
      stream.resume();
      return this.fail(new ValidationError(`Unexpected file part "${field}": send the file as the part named "file".`));
    }
    const name = baseName(filename ?? '');
    this.fileName = name;
    this.fileStream = stream;
    if (this.dir !== undefined) {
      // `dir` came first: refuse a bad name or a taken one before reading the file.
      const problem = uploadNameProblem(this.dir, name);
      if (problem) {
        stream.resume();
        return this.fail(new ValidationError(problem));
      }
      const dir = this.dir;
      findFile(this.deps.db, dir, name).then(
        (row) => {
          if (row) this.fail(conflict(dir, name));
        },
        () => undefined, // the check after the body repeats it and reports an outage
      );
    }
    stream.on('limit', () => this.fail(new PayloadTooLargeError(this.deps.maxBytes)));
    this.writing = this.write(stream);
    this.writing.catch((err: unknown) => {
      if (this.finished) return;
      if (isMultipartError(err)) return this.fail(new ValidationError(`The multipart body is malformed: ${messageOf(err)}.`));
      this.deps.logger.error({ err }, 'writing an upload to its scratch file failed');
      this.fail(new ServiceUnavailableError('The upload could not be received; nothing was stored. Retry shortly.'));
    });
  }

  /** Streams the file part to the scratch file (synced to disk), hashing and counting on the way. */
  private async write(stream: Readable): Promise<{ size: number; sha256: string }> {
    const hash = createHash('sha256');
    let size = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        hash.update(chunk);
        size += chunk.length;
        callback(null, chunk);
      },
    });
    // The write stream owns its descriptor (a FileHandle lent to a stream that does not close
    // it is never released); the bytes are synced through a second descriptor afterwards.
    this.sink = createWriteStream(this.filePath, { flags: 'wx' });
    await pipeline(stream, meter, this.sink);
    const handle = await open(this.filePath, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    return { size, sha256: hash.digest('hex') };
  }

  private async onClose(): Promise<void> {
    if (this.finished) return;
    const dir = this.dir;
    const name = this.fileName;
    if (dir === undefined) return this.fail(new ValidationError('The form needs a `dir` field: files or firmware.'));
    if (name === undefined || !this.writing) return this.fail(new ValidationError('The form needs a `file` part.'));
    const problem = uploadNameProblem(dir, name);
    if (problem) return this.fail(new ValidationError(problem));
    try {
      const written = await this.writing;
      if (this.finished) return;
      this.finished = true;
      this.resolve({ dir, name, path: this.filePath, ...written });
    } catch {
      // reported by the writing's own handler
    }
  }

  /** Fails the upload once and stops reading the body (nothing drains it). */
  private fail(err: unknown): void {
    if (this.finished) return;
    this.finished = true;
    const { body } = this.input;
    if (this.parser) {
      body.unpipe(this.parser);
      this.parser.destroy();
    }
    body.pause();
    this.fileStream?.destroy();
    this.sink?.destroy();
    this.reject(err);
  }
}

async function checkAudio(deps: UploadDeps, filePath: string, name: string): Promise<AudioCheck> {
  const verdict = await (deps.audioCheck ?? checkMp3File)(filePath, name);
  if (verdict.ok) return verdict.audio;
  const code = 'code' in verdict && typeof verdict.code === 'string' ? verdict.code : undefined;
  const reason = verdict.reason.replace(/\.$/, '');
  throw new ValidationError(code && !reason.includes(`(${code})`) ? `${reason} (${code}).` : `${reason}.`);
}

/** Records the file and writes its bytes in one transaction (see the top of this file). */
async function store(deps: UploadDeps, signal: AbortSignal | undefined, file: ReceivedFile & { audio: AudioCheck | null }): Promise<PlatformFileRow> {
  const key = storageKeyOf(file.dir, file.name);
  try {
    return await deps.db.$transaction(
      async (tx) => {
        const row = await insertFile(tx, { dir: file.dir, name: file.name, size: file.size, sha256: file.sha256, audio: file.audio, storageKey: key });
        if (!row) throw conflict(file.dir, file.name);
        await putBytes(deps, key, file);
        if (signal?.aborted) {
          // Still holding the name: the bytes can go with the record.
          await deps.storage.remove(key).catch((err: unknown) => deps.logger.warn({ err, key }, 'removing the bytes of an abandoned upload failed'));
          throw new UploadAbortedError();
        }
        return row;
      },
      { maxWait: 5_000, timeout: deps.commitTimeoutMs ?? DEFAULT_COMMIT_TIMEOUT_MS },
    );
  } catch (err) {
    if (err instanceof ApiError || err instanceof UploadAbortedError) throw err;
    if (isStoreOutage(err)) throw new ServiceUnavailableError();
    throw err;
  }
}

/** putNew, replacing an object no record owns (the caller's transaction holds the name). */
async function putBytes(deps: UploadDeps, key: string, file: ReceivedFile): Promise<void> {
  try {
    if (await deps.storage.putNew(key, file.path, file.size)) return;
    deps.logger.warn({ key }, 'replacing stored bytes no file record owns (left by an upload that did not commit)');
    await deps.storage.remove(key);
    if (await deps.storage.putNew(key, file.path, file.size)) return;
  } catch (err) {
    deps.logger.error({ err, key }, 'writing an upload to the file storage failed');
    throw new ServiceUnavailableError('The file storage is unavailable; nothing was stored. Retry shortly.');
  }
  throw new ConflictError(`${file.dir}/${file.name} is being written by another upload.`);
}

function conflict(dir: FileDir, name: string): ConflictError {
  return new ConflictError(`${dir}/${name} exists; uploads never overwrite: delete it first.`);
}

/** busboy's own errors of a body that ends early or has a broken part. */
function isMultipartError(err: unknown): boolean {
  return err instanceof Error && /^(Unexpected end of (form|file)|Malformed part header)/.test(err.message);
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message.replace(/\.$/, '') : String(err);
}

function formatMegabytes(bytes: number): string {
  const mb = bytes / (1024 * 1024);
  return `${Number.isInteger(mb) ? mb : mb.toFixed(1)} MB`;
}
