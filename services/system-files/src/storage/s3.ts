import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, S3Client, S3ServiceException, type S3ClientConfig } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { NotFoundError } from '@fleet/service-kit';
import type { FileStorage } from './storage';

export interface S3StorageOptions {
  bucket: string;
  region: string;
  /** An S3-compatible endpoint (MinIO, Ceph, R2); AWS when absent. */
  endpoint?: string;
  forcePathStyle?: boolean;
  /** Put in front of every key as is (`fleet/` gives `fleet/files/a.mp3`). */
  prefix?: string;
  /** Credentials; the SDK's default chain (environment, profile, instance role) when absent. */
  credentials?: S3ClientConfig['credentials'];
}

const PUT_ATTEMPTS = 3;

/** The SDK's own warnings go nowhere: every failure reaches the caller, which logs it with its request. */
const quietSdkLogger = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

/** The longest validity S3 accepts for a presigned URL (SigV4: 7 days). */
const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;

/**
 * Platform files in S3-compatible object storage. Several replicas share it.
 *
 * putNew is a single PutObject (no multipart: a platform file is at most a few tens of MB)
 * streamed from the local file with its length, conditional on `If-None-Match: *`: the store
 * refuses it (412) when the key exists, atomically, so uploads never overwrite. Stores that
 * ignore conditional writes would overwrite instead; AWS S3, MinIO and R2 honour it.
 * Checksums are sent only when an operation requires them, as S3-compatible stores differ in
 * how they take the SDK's default streaming checksums.
 */
export class S3FileStorage implements FileStorage {
  readonly kind = 's3' as const;
  readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(options: S3StorageOptions) {
    this.bucket = options.bucket;
    this.prefix = options.prefix ?? '';
    this.client = new S3Client({
      region: options.region,
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      forcePathStyle: options.forcePathStyle ?? false,
      ...(options.credentials ? { credentials: options.credentials } : {}),
      logger: quietSdkLogger,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  objectKey(key: string): string {
    return `${this.prefix}${key}`;
  }

  async putNew(key: string, localPath: string, size: number): Promise<boolean> {
    // The SDK cannot retry a streamed body, so transient failures (5xx, network) are retried
    // here with a fresh stream. A retry may find the key taken by its own earlier attempt that
    // did land: the caller treats an unowned object as left over and replaces it.
    for (let attempt = 1; ; attempt++) {
      const body = createReadStream(localPath);
      try {
        await this.client.send(
          new PutObjectCommand({
            Bucket: this.bucket,
            Key: this.objectKey(key),
            Body: body,
            ContentLength: size,
            ContentType: 'application/octet-stream',
            IfNoneMatch: '*',
          }),
        );
        return true;
      } catch (err) {
        // 412: the key exists. 409: another conditional write of the key is under way (it wins).
        const status = statusOf(err);
        if (status === 412 || status === 409) return false;
        if (attempt >= PUT_ATTEMPTS || (status !== undefined && status < 500)) throw err;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      } finally {
        body.destroy();
      }
    }
  }

  async open(key: string): Promise<Readable> {
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }));
      if (!(out.Body instanceof Readable)) throw new Error(`GetObject of ${key} returned no stream`);
      return out.Body;
    } catch (err) {
      if (statusOf(err) === 404) throw new NotFoundError(`No stored object ${key}.`);
      throw err;
    }
  }

  async remove(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }));
  }

  async directUrl(key: string, ttlSeconds: number): Promise<string> {
    const expiresIn = Math.max(1, Math.min(MAX_PRESIGN_SECONDS, Math.floor(ttlSeconds)));
    return getSignedUrl(this.client, new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }), { expiresIn });
  }
}

function statusOf(err: unknown): number | undefined {
  if (err instanceof S3ServiceException) return err.$metadata.httpStatusCode;
  const status = (err as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata?.httpStatusCode;
  return typeof status === 'number' ? status : undefined;
}
