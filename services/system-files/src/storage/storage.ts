import type { Readable } from 'node:stream';

/**
 * Where platform files' bytes live: a local directory (the embedded default) or S3-compatible
 * object storage (production), chosen by FILE_STORAGE. Keys are `<dir>/<name>`.
 */
export interface FileStorage {
  readonly kind: 'local' | 's3';
  /**
   * Stores the file at `localPath` (size bytes) under `key`, never replacing an object that
   * exists: resolves false when the key is taken.
   */
  putNew(key: string, localPath: string, size: number): Promise<boolean>;
  /** The object's bytes; rejects with a NotFoundError when there is none. */
  open(key: string): Promise<Readable>;
  /** Deletes the object (a missing one is fine). */
  remove(key: string): Promise<void>;
  /**
   * A URL a device downloads from directly (an S3 presigned URL valid ttlSeconds), or undefined
   * when the fleet's file server serves the file (local storage).
   */
  directUrl(key: string, ttlSeconds: number): Promise<string | undefined>;
}
