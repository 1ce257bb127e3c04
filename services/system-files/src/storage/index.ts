import type { SystemConfig } from '../config';
import { LocalFileStorage } from './local';
import { S3FileStorage } from './s3';
import type { FileStorage } from './storage';

export type { FileStorage } from './storage';
export { LocalFileStorage } from './local';
export { S3FileStorage, type S3StorageOptions } from './s3';

/**
 * The storage backend FILE_STORAGE names: `local` (FILE_STORAGE_DIR, relative to the working
 * directory, created on first write) or `s3` (S3_BUCKET, S3_REGION, S3_ENDPOINT,
 * S3_FORCE_PATH_STYLE, S3_PREFIX; credentials from the AWS SDK's default chain).
 */
export function createStorage(
  config: Pick<SystemConfig, 'FILE_STORAGE' | 'FILE_STORAGE_DIR' | 'S3_BUCKET' | 'S3_REGION' | 'S3_ENDPOINT' | 'S3_FORCE_PATH_STYLE' | 'S3_PREFIX'>,
): FileStorage {
  if (config.FILE_STORAGE === 'local') return new LocalFileStorage(config.FILE_STORAGE_DIR);
  if (!config.S3_BUCKET) throw new Error('invalid configuration: S3_BUCKET is required with FILE_STORAGE=s3');
  return new S3FileStorage({
    bucket: config.S3_BUCKET,
    region: config.S3_REGION,
    ...(config.S3_ENDPOINT ? { endpoint: config.S3_ENDPOINT } : {}),
    forcePathStyle: config.S3_FORCE_PATH_STYLE,
    prefix: config.S3_PREFIX,
  });
}
