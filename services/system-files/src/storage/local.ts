import { randomUUID } from 'node:crypto';
import { copyFile, link, mkdir, open, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { NotFoundError } from '@fleet/service-kit';
import type { FileStorage } from './storage';

/** Where copies wait before they are linked into place; never a key (keys start with a letter). */
const STAGING_DIR = '.staging';

/**
 * Platform files in a local directory (FILE_STORAGE_DIR): key `<dir>/<name>` is the file
 * `<root>/<dir>/<name>`. Fits one replica, or several sharing a POSIX file system.
 *
 * putNew never replaces: the bytes are hard-linked into place, and link(2) fails with EEXIST
 * when the name is taken, atomically, so two writers of one key cannot both win and a reader
 * never sees a half-written file. A source on another file system is first copied (and synced)
 * into `<root>/.staging`, then linked from there.
 */
export class LocalFileStorage implements FileStorage {
  readonly kind = 'local' as const;
  readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
  }

  /** Where uploads are best received: on the same file system, so putNew links instead of copying. */
  get incomingDir(): string {
    return path.join(this.root, '.incoming');
  }

  async putNew(key: string, localPath: string, size: number): Promise<boolean> {
    const target = this.pathOf(key);
    await mkdir(path.dirname(target), { recursive: true });
    const source = await open(localPath, 'r');
    try {
      const { size: actual } = await source.stat();
      if (actual !== size) throw new Error(`${localPath} holds ${actual} bytes, not the ${size} expected`);
    } finally {
      await source.close();
    }
    try {
      await link(localPath, target);
      return true;
    } catch (err) {
      if (codeOf(err) === 'EEXIST') return false;
      if (!['EXDEV', 'EPERM', 'ENOTSUP', 'EOPNOTSUPP'].includes(codeOf(err) ?? '')) throw err;
    }
    return this.putCopy(target, localPath);
  }

  async open(key: string): Promise<Readable> {
    try {
      const handle = await open(this.pathOf(key), 'r');
      return handle.createReadStream();
    } catch (err) {
      if (codeOf(err) === 'ENOENT') throw new NotFoundError(`No stored object ${key}.`);
      throw err;
    }
  }

  async remove(key: string): Promise<void> {
    try {
      await unlink(this.pathOf(key));
    } catch (err) {
      if (codeOf(err) !== 'ENOENT') throw err;
    }
  }

  async directUrl(): Promise<undefined> {
    return undefined;
  }

  /** The file of a key; refuses keys that could leave the root or name the staging areas. */
  pathOf(key: string): string {
    const segments = key.split('/');
    if (segments.length < 2 || segments.some((s) => !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(s))) throw new Error(`invalid storage key ${JSON.stringify(key)}`);
    return path.join(this.root, ...segments);
  }

  /** Copies into the staging area (same file system as the target), syncs, then links exclusively. */
  private async putCopy(target: string, localPath: string): Promise<boolean> {
    const staging = path.join(this.root, STAGING_DIR);
    await mkdir(staging, { recursive: true });
    const temp = path.join(staging, randomUUID());
    try {
      await copyFile(localPath, temp);
      const handle = await open(temp, 'r+');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
      await link(temp, target);
      return true;
    } catch (err) {
      if (codeOf(err) === 'EEXIST') return false;
      throw err;
    } finally {
      await unlink(temp).catch(() => undefined);
    }
  }
}

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
