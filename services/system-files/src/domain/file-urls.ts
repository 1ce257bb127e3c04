/** A platform file as the URL signer needs it. */
export interface StoredFileRef {
  dir: 'files' | 'firmware';
  name: string;
  storageKey: string;
}

/**
 * URLs of the file server (src/http/file-server.ts) and of the storage backend; implemented by
 * SignedFileUrls (./signed-urls.ts).
 */
export interface FileUrls {
  /**
   * The https URL a device downloads a platform file from: an S3 presigned URL, or the file
   * server's expiring signed URL (carrying the transfer id when given: corr_mode url_token).
   */
  downloadUrl(file: StoredFileRef, options?: { transferId?: string }): Promise<string>;
  /** Where the gateway streams one upload (a signed ticket valid for a minute). */
  uploadUrl(ticket: { requestId: string; partnerId: string }): string;
}
