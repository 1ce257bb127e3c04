import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { SystemConfig } from '../config';
import type { FileStorage } from '../storage/storage';
import { isFileDir, type FileDir } from './file-names';
import type { FileUrls, StoredFileRef } from './file-urls';

/**
 * Signed, expiring tokens of the file server: a device's download URL (`/d/<token>`) and the
 * gateway's upload ticket (`/uploads/<ticket>`).
 *
 * A token is `<payload>.<signature>`: the payload is base64url JSON, the signature base64url
 * HMAC-SHA256 of the payload text under FILES_URL_SECRET. Every payload names its purpose, so
 * an upload ticket never opens a download and the other way round. Tokens hold only `[A-Za-z0-9_.-]`,
 * so they sit safely in a URL path and in a `sys/exe` line (`;url=...`).
 *
 * Without FILES_URL_SECRET each process draws a random key at start: URLs it signed stop
 * working when it restarts, and another replica refuses them. Set FILES_URL_SECRET (the same
 * value on every replica) whenever more than one replica runs or URLs must outlive a restart.
 */

/** What a download token carries. */
export interface DownloadClaims {
  dir: FileDir;
  name: string;
  /** Expiry, epoch seconds. */
  expiresAt: number;
  /** The file push this URL was issued for (corr_mode url_token). */
  transferId?: string;
}

/** What an upload ticket carries. */
export interface UploadTicketClaims {
  partnerId: string;
  requestId: string;
  /** Expiry, epoch seconds. */
  expiresAt: number;
}

export type TokenProblem = 'malformed' | 'bad_signature' | 'expired';
export type Verified<T> = { ok: true; claims: T } | { ok: false; problem: TokenProblem };

/** How long an upload ticket is valid: the gateway posts the body right after asking for it. */
export const UPLOAD_TICKET_TTL_SECONDS = 60;

interface DownloadPayload {
  k: 'd';
  d: string;
  n: string;
  e: number;
  x?: string;
}

interface UploadPayload {
  k: 'u';
  p: string;
  r: string;
  e: number;
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/** Signs and verifies the file server's tokens with one key. */
export class UrlTokens {
  private readonly key: Buffer;
  /** True when no secret was configured and this process drew its own (one replica only). */
  readonly generatedSecret: boolean;

  constructor(secret?: string) {
    this.generatedSecret = !secret;
    this.key = secret ? Buffer.from(secret, 'utf8') : randomBytes(32);
  }

  signDownload(claims: DownloadClaims): string {
    const payload: DownloadPayload = { k: 'd', d: claims.dir, n: claims.name, e: claims.expiresAt, ...(claims.transferId ? { x: claims.transferId } : {}) };
    return this.sign(payload);
  }

  verifyDownload(token: string, now = nowSeconds()): Verified<DownloadClaims> {
    const read = this.open(token);
    if (!read.ok) return read;
    const p = read.payload as Partial<DownloadPayload>;
    if (p.k !== 'd' || !isFileDir(p.d) || typeof p.n !== 'string' || typeof p.e !== 'number' || (p.x !== undefined && typeof p.x !== 'string')) {
      return { ok: false, problem: 'malformed' };
    }
    if (p.e <= now) return { ok: false, problem: 'expired' };
    return { ok: true, claims: { dir: p.d, name: p.n, expiresAt: p.e, ...(p.x !== undefined ? { transferId: p.x } : {}) } };
  }

  signUploadTicket(claims: UploadTicketClaims): string {
    const payload: UploadPayload = { k: 'u', p: claims.partnerId, r: claims.requestId, e: claims.expiresAt };
    return this.sign(payload);
  }

  verifyUploadTicket(ticket: string, now = nowSeconds()): Verified<UploadTicketClaims> {
    const read = this.open(ticket);
    if (!read.ok) return read;
    const p = read.payload as Partial<UploadPayload>;
    if (p.k !== 'u' || typeof p.p !== 'string' || typeof p.r !== 'string' || typeof p.e !== 'number') return { ok: false, problem: 'malformed' };
    if (p.e <= now) return { ok: false, problem: 'expired' };
    return { ok: true, claims: { partnerId: p.p, requestId: p.r, expiresAt: p.e } };
  }

  private sign(payload: DownloadPayload | UploadPayload): string {
    const body = Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url');
    return `${body}.${this.mac(body).toString('base64url')}`;
  }

  private open(token: string): { ok: true; payload: unknown } | { ok: false; problem: TokenProblem } {
    const match = /^([A-Za-z0-9_-]{1,2048})\.([A-Za-z0-9_-]{43})$/.exec(token);
    if (!match) return { ok: false, problem: 'malformed' };
    const [, body = '', signature = ''] = match;
    const given = Buffer.from(signature, 'base64url');
    const expected = this.mac(body);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, problem: 'bad_signature' };
    try {
      return { ok: true, payload: JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as unknown };
    } catch {
      return { ok: false, problem: 'malformed' };
    }
  }

  private mac(body: string): Buffer {
    return createHmac('sha256', this.key).update(body).digest();
  }
}

export interface SignedFileUrlsOptions {
  tokens: UrlTokens;
  storage: FileStorage;
  /** Base URL devices download from (FILES_PUBLIC_URL, else the file server's own address). */
  publicUrl: string;
  /** Base URL the gateway streams uploads to (FILES_INTERNAL_URL, else the file server's own address). */
  internalUrl: string;
  /** How long a download URL is valid (DOWNLOAD_URL_TTL_SECONDS). */
  downloadTtlSeconds: number;
  uploadTtlSeconds?: number;
  /** Epoch seconds; tests move the clock. */
  now?: () => number;
}

/**
 * The URLs system-files hands out.
 *
 * Download: with S3 storage, the object's presigned GET URL (devices fetch straight from the
 * bucket); with local storage, `<publicUrl>/d/<token>` of the file server. A transfer id
 * (corr_mode url_token) can only travel in the file server's URL, since an S3 presigned URL
 * cannot carry a field of ours: with a transfer id the URL is always the file server's, which
 * then streams the object from S3. url_token therefore needs the file server reachable by
 * devices (FILES_PUBLIC_URL) whatever the storage.
 */
export class SignedFileUrls implements FileUrls {
  private readonly publicUrl: string;
  private readonly internalUrl: string;
  private readonly now: () => number;

  constructor(private readonly options: SignedFileUrlsOptions) {
    this.publicUrl = options.publicUrl.replace(/\/+$/, '');
    this.internalUrl = options.internalUrl.replace(/\/+$/, '');
    this.now = options.now ?? nowSeconds;
  }

  async downloadUrl(file: StoredFileRef, options: { transferId?: string } = {}): Promise<string> {
    if (!options.transferId) {
      const direct = await this.options.storage.directUrl(file.storageKey, this.options.downloadTtlSeconds);
      if (direct) return direct;
    }
    return this.fileServerUrl(file, options.transferId);
  }

  /** The file server's signed URL of a file, whatever the storage. */
  fileServerUrl(file: Pick<StoredFileRef, 'dir' | 'name'>, transferId?: string): string {
    const token = this.options.tokens.signDownload({ dir: file.dir, name: file.name, expiresAt: this.now() + this.options.downloadTtlSeconds, ...(transferId ? { transferId } : {}) });
    return `${this.publicUrl}/d/${token}`;
  }

  uploadUrl(ticket: { requestId: string; partnerId: string }): string {
    const token = this.options.tokens.signUploadTicket({ ...ticket, expiresAt: this.now() + (this.options.uploadTtlSeconds ?? UPLOAD_TICKET_TTL_SECONDS) });
    return `${this.internalUrl}/uploads/${token}`;
  }
}

/**
 * The service's SignedFileUrls: base URLs from FILES_PUBLIC_URL / FILES_INTERNAL_URL, each
 * defaulting to the file server's own `http://127.0.0.1:<port>`.
 */
export function createFileUrls(
  config: Pick<SystemConfig, 'FILES_PUBLIC_URL' | 'FILES_INTERNAL_URL' | 'DOWNLOAD_URL_TTL_SECONDS'>,
  parts: { tokens: UrlTokens; storage: FileStorage; fileServerPort: number },
): SignedFileUrls {
  const own = `http://127.0.0.1:${parts.fileServerPort}`;
  return new SignedFileUrls({
    tokens: parts.tokens,
    storage: parts.storage,
    publicUrl: config.FILES_PUBLIC_URL ?? own,
    internalUrl: config.FILES_INTERNAL_URL ?? own,
    downloadTtlSeconds: config.DOWNLOAD_URL_TTL_SECONDS,
  });
}
