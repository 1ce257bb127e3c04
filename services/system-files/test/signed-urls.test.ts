import type { FileStorage } from '../src/storage/storage';
import { createFileUrls, SignedFileUrls, UPLOAD_TICKET_TTL_SECONDS, UrlTokens } from '../src/domain/signed-urls';

const SECRET = 'a-test-secret-of-at-least-32-characters!';

function fakeStorage(direct?: string): FileStorage & { asked: Array<{ key: string; ttl: number }> } {
  const asked: Array<{ key: string; ttl: number }> = [];
  return {
    kind: direct ? 's3' : 'local',
    asked,
    putNew: async () => true,
    open: async () => {
      throw new Error('not used');
    },
    remove: async () => undefined,
    directUrl: async (key, ttl) => {
      asked.push({ key, ttl });
      return direct ? `${direct}/${key}?X-Amz-Signature=abc` : undefined;
    },
  };
}

const file = { dir: 'files' as const, name: 'chime.mp3', storageKey: 'files/chime.mp3' };
const tokenOf = (url: string, base: string): string => url.slice(base.length);

describe('UrlTokens', () => {
  const tokens = new UrlTokens(SECRET);
  const now = 1_800_000_000;

  it('signs download tokens that verify with their dir, name, expiry and transfer id', () => {
    const token = tokens.signDownload({ dir: 'firmware', name: 'fw-1.2.bin', expiresAt: now + 60, transferId: 'xfer_1' });
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(tokens.verifyDownload(token, now)).toEqual({ ok: true, claims: { dir: 'firmware', name: 'fw-1.2.bin', expiresAt: now + 60, transferId: 'xfer_1' } });
    const plain = tokens.signDownload({ dir: 'files', name: 'a.mp3', expiresAt: now + 60 });
    expect(tokens.verifyDownload(plain, now)).toEqual({ ok: true, claims: { dir: 'files', name: 'a.mp3', expiresAt: now + 60 } });
  });

  it('refuses an expired token', () => {
    const token = tokens.signDownload({ dir: 'files', name: 'a.mp3', expiresAt: now });
    expect(tokens.verifyDownload(token, now)).toEqual({ ok: false, problem: 'expired' });
    expect(tokens.verifyDownload(token, now - 1).ok).toBe(true);
  });

  it('refuses a tampered payload, a tampered signature and another key', () => {
    const token = tokens.signDownload({ dir: 'files', name: 'a.mp3', expiresAt: now + 60 });
    const [body = '', sig = ''] = token.split('.');
    const forged = Buffer.from(JSON.stringify({ k: 'd', d: 'files', n: 'b.mp3', e: now + 60 })).toString('base64url');
    expect(tokens.verifyDownload(`${forged}.${sig}`, now)).toEqual({ ok: false, problem: 'bad_signature' });
    const flipped = `${sig.startsWith('A') ? 'B' : 'A'}${sig.slice(1)}`;
    expect(tokens.verifyDownload(`${body}.${flipped}`, now)).toEqual({ ok: false, problem: 'bad_signature' });
    expect(new UrlTokens(`${SECRET}-other`).verifyDownload(token, now)).toEqual({ ok: false, problem: 'bad_signature' });
    for (const bad of ['', 'abc', `${body}.`, `${body}.${sig}x`, `${body}/x.${sig}`]) expect(tokens.verifyDownload(bad, now)).toEqual({ ok: false, problem: 'malformed' });
  });

  it('keeps the purposes apart: a ticket opens no download and a download token is no ticket', () => {
    const ticket = tokens.signUploadTicket({ partnerId: 'p1', requestId: 'r1', expiresAt: now + 60 });
    const download = tokens.signDownload({ dir: 'files', name: 'a.mp3', expiresAt: now + 60 });
    expect(tokens.verifyUploadTicket(ticket, now)).toEqual({ ok: true, claims: { partnerId: 'p1', requestId: 'r1', expiresAt: now + 60 } });
    expect(tokens.verifyDownload(ticket, now)).toEqual({ ok: false, problem: 'malformed' });
    expect(tokens.verifyUploadTicket(download, now)).toEqual({ ok: false, problem: 'malformed' });
    expect(tokens.verifyUploadTicket(ticket, now + 60)).toEqual({ ok: false, problem: 'expired' });
  });

  it('draws a random key per process when no secret is set', () => {
    const a = new UrlTokens();
    const b = new UrlTokens();
    expect(a.generatedSecret).toBe(true);
    expect(tokens.generatedSecret).toBe(false);
    const token = a.signDownload({ dir: 'files', name: 'a.mp3', expiresAt: now + 60 });
    expect(a.verifyDownload(token, now).ok).toBe(true);
    expect(b.verifyDownload(token, now)).toEqual({ ok: false, problem: 'bad_signature' });
  });
});

describe('SignedFileUrls', () => {
  const now = 1_800_000_000;
  const tokens = new UrlTokens(SECRET);

  it('with local storage, gives the file server URL /d/<token> valid for the download TTL, carrying the transfer id', async () => {
    const urls = new SignedFileUrls({ tokens, storage: fakeStorage(), publicUrl: 'https://files.example.com/', internalUrl: 'http://system-files:9180', downloadTtlSeconds: 3600, now: () => now });
    const url = await urls.downloadUrl(file);
    expect(url).toMatch(/^https:\/\/files\.example\.com\/d\/[A-Za-z0-9_.-]+$/);
    expect(tokens.verifyDownload(tokenOf(url, 'https://files.example.com/d/'), now)).toEqual({ ok: true, claims: { dir: 'files', name: 'chime.mp3', expiresAt: now + 3600 } });
    const withTransfer = await urls.downloadUrl(file, { transferId: 'xfer_9' });
    expect(tokens.verifyDownload(tokenOf(withTransfer, 'https://files.example.com/d/'), now)).toMatchObject({ ok: true, claims: { transferId: 'xfer_9' } });
    expect(url).not.toContain(';');
  });

  it('with S3 storage, gives the presigned URL, except with a transfer id (only the file server URL carries it)', async () => {
    const storage = fakeStorage('https://bucket.s3.example.com');
    const urls = new SignedFileUrls({ tokens, storage, publicUrl: 'https://files.example.com', internalUrl: 'http://system-files:9180', downloadTtlSeconds: 900, now: () => now });
    expect(await urls.downloadUrl(file)).toBe('https://bucket.s3.example.com/files/chime.mp3?X-Amz-Signature=abc');
    expect(storage.asked).toEqual([{ key: 'files/chime.mp3', ttl: 900 }]);
    const withTransfer = await urls.downloadUrl(file, { transferId: 'xfer_9' });
    expect(withTransfer.startsWith('https://files.example.com/d/')).toBe(true);
    expect(storage.asked).toHaveLength(1);
  });

  it('gives upload URLs on the internal base, with a ticket of about a minute naming partner and request', () => {
    const urls = new SignedFileUrls({ tokens, storage: fakeStorage(), publicUrl: 'https://files.example.com', internalUrl: 'http://system-files:9180/', downloadTtlSeconds: 3600, now: () => now });
    const url = urls.uploadUrl({ requestId: 'req_1', partnerId: 'partner_1' });
    expect(url).toMatch(/^http:\/\/system-files:9180\/uploads\/[A-Za-z0-9_.-]+$/);
    expect(tokens.verifyUploadTicket(tokenOf(url, 'http://system-files:9180/uploads/'), now)).toEqual({
      ok: true,
      claims: { partnerId: 'partner_1', requestId: 'req_1', expiresAt: now + UPLOAD_TICKET_TTL_SECONDS },
    });
    expect(UPLOAD_TICKET_TTL_SECONDS).toBe(60);
  });

  it('defaults both base URLs to the file server on 127.0.0.1', async () => {
    const urls = createFileUrls({ DOWNLOAD_URL_TTL_SECONDS: 3600, FILES_PUBLIC_URL: undefined, FILES_INTERNAL_URL: undefined }, { tokens, storage: fakeStorage(), fileServerPort: 4321 });
    expect(await urls.downloadUrl(file)).toMatch(/^http:\/\/127\.0\.0\.1:4321\/d\//);
    expect(urls.uploadUrl({ requestId: 'r', partnerId: 'p' })).toMatch(/^http:\/\/127\.0\.0\.1:4321\/uploads\//);
    const configured = createFileUrls(
      { DOWNLOAD_URL_TTL_SECONDS: 3600, FILES_PUBLIC_URL: 'https://dl.example.com', FILES_INTERNAL_URL: 'http://files.internal:9180' },
      { tokens, storage: fakeStorage(), fileServerPort: 4321 },
    );
    expect(await configured.downloadUrl(file)).toMatch(/^https:\/\/dl\.example\.com\/d\//);
    expect(configured.uploadUrl({ requestId: 'r', partnerId: 'p' })).toMatch(/^http:\/\/files\.internal:9180\/uploads\//);
  });
});
