import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { request, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ApiError, RequestOf } from '@fleet/service-kit';
import { uniqueId, waitFor } from '@fleet/test-kit';
import { UrlTokens, createFileUrls, type SignedFileUrls } from '../src/domain/signed-urls';
import type { SystemDeps } from '../src/handlers/deps';
import { listFiles } from '../src/handlers/files';
import { startFileServer, type FileServer } from '../src/http/file-server';
import { LocalFileStorage } from '../src/storage/local';
import { findFile } from '../src/store/files';
import { createTestDb, logger, type TestDb } from './support';

const MB = 1024 * 1024;
const MAX = 32 * MB;
const SECRET = 'upload-test-secret-of-at-least-32-chars';

let testDb: TestDb;
let root: string;
let storage: LocalFileStorage;
let tokens: UrlTokens;
let server: FileServer;
let urls: SignedFileUrls;
let base: string;

beforeAll(async () => {
  testDb = await createTestDb();
  root = await mkdtemp(path.join(tmpdir(), 'fleet-upload-test-'));
  storage = new LocalFileStorage(path.join(root, 'files'));
  tokens = new UrlTokens(SECRET);
  server = await startFileServer({ config: { FILES_HTTP_PORT: 0, FILES_HTTP_HOST: '127.0.0.1', UPLOAD_MAX_BYTES: MAX }, db: testDb.db, storage, tokens, logger });
  urls = createFileUrls({ DOWNLOAD_URL_TTL_SECONDS: 3600, FILES_PUBLIC_URL: undefined, FILES_INTERNAL_URL: undefined }, { tokens, storage, fileServerPort: server.port });
  base = `http://127.0.0.1:${server.port}`;
});

afterAll(async () => {
  await server?.close();
  await testDb?.drop();
  await rm(root, { recursive: true, force: true });
});

// ---- multipart bodies, written by hand -------------------------------------------------------

type Part = { field: string; value: string } | { field: string; filename: string; data: Buffer };

function multipart(parts: Part[], boundary = `----fleet${randomBytes(8).toString('hex')}`): { body: Buffer; contentType: string } {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    if ('value' in part) {
      chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${part.field}"\r\n\r\n${part.value}\r\n`));
    } else {
      chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${part.field}"; filename="${part.filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`));
      chunks.push(part.data, Buffer.from('\r\n'));
    }
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  json: Record<string, unknown>;
}

const ticketUrl = (requestId = uniqueId('req')): string => urls.uploadUrl({ requestId, partnerId: 'partner-1' });

async function upload(parts: Part[], options: { url?: string; requestId?: string; contentType?: string } = {}): Promise<Answer> {
  const { body, contentType } = multipart(parts);
  const requestId = options.requestId ?? uniqueId('req');
  const res = await fetch(options.url ?? ticketUrl(requestId), {
    method: 'POST',
    body,
    headers: { 'Content-Type': options.contentType ?? contentType, 'X-Request-Id': requestId },
  });
  const text = await res.text();
  return { status: res.status, headers: Object.fromEntries(res.headers.entries()), json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const sha = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
const file = (filename: string, data: Buffer | string): Part => ({ field: 'file', filename, data: typeof data === 'string' ? Buffer.from(data) : data });
const dir = (value: string): Part => ({ field: 'dir', value });

/**
 * Streams a multipart body whose file part is `fileBytes` bytes of generated data, chunk by
 * chunk with backpressure, stopping as soon as the answer arrives or the connection is cut.
 * `written` counts the bytes the socket took.
 */
function streamUpload(
  url: string,
  options: { dirValue?: string; filename: string; fileBytes: number; chunked?: boolean; declaredLength?: number; pauseAfter?: number; onPause?: () => Promise<void> },
): Promise<{ status: number; headers: IncomingHttpHeaders; json: Record<string, unknown>; written: number; total: number }> {
  const boundary = `----fleet${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(
    (options.dirValue ? `--${boundary}\r\nContent-Disposition: form-data; name="dir"\r\n\r\n${options.dirValue}\r\n` : '') +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${options.filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const total = head.length + options.fileBytes + tail.length;
  const requestId = uniqueId('req');
  return new Promise((resolve, reject) => {
    let answered = false;
    let written = 0;
    const headers: Record<string, string> = { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'X-Request-Id': requestId };
    if (!options.chunked) headers['Content-Length'] = String(options.declaredLength ?? total);
    const req = request(url, { method: 'POST', headers });
    let outcome: { status: number; headers: IncomingHttpHeaders; json: Record<string, unknown> } | undefined;
    req.on('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        outcome = { status: res.statusCode ?? 0, headers: res.headers, json: JSON.parse(Buffer.concat(chunks).toString() || '{}') as Record<string, unknown> };
        resolve({ ...outcome, written, total });
      });
      res.on('error', reject);
    });
    req.on('error', (err) => {
      // The server closed the connection after answering: the answer is what counts.
      if (!answered) reject(err);
    });
    const chunk = Buffer.alloc(64 * 1024, 0x5a);
    const write = (bytes: Buffer): Promise<boolean> =>
      new Promise((done) => {
        if (answered || req.destroyed) return done(false);
        const ok = req.write(bytes, () => {
          written += bytes.length;
        });
        if (ok) return done(true);
        const onDrain = () => {
          clearInterval(watch);
          done(true);
        };
        req.once('drain', onDrain);
        const watch = setInterval(() => {
          if (answered || req.destroyed) {
            req.off('drain', onDrain);
            clearInterval(watch);
            done(false);
          }
        }, 20);
      });
    void (async () => {
      if (!(await write(head))) return;
      let sent = 0;
      let paused = false;
      while (sent < options.fileBytes) {
        if (!paused && options.pauseAfter !== undefined && sent >= options.pauseAfter) {
          paused = true;
          await options.onPause?.();
        }
        const n = Math.min(chunk.length, options.fileBytes - sent);
        if (!(await write(n === chunk.length ? chunk : chunk.subarray(0, n)))) return;
        sent += n;
      }
      if (!(await write(tail))) return;
      req.end();
    })();
  });
}

const scratchDirs = async (): Promise<string[]> => (await readdir(storage.incomingDir).catch(() => [] as string[])).filter((e) => e.startsWith('fleet-upload-'));
const storedBytes = (dirName: string, name: string): Promise<Buffer> => readFile(path.join(storage.root, dirName, name));

/** `count` MPEG-1 Layer III frames (128 kbps, 44.1 kHz, joint stereo): header 0xFFFB9064, zeros to 417 bytes each. */
function mp3Frames(count: number): Buffer {
  const frame = Buffer.alloc(417);
  frame.writeUInt32BE(0xfffb9064, 0);
  return Buffer.concat(Array.from({ length: count }, () => frame));
}

/** A minimal PCM WAV file. */
function wavFile(samples: number): Buffer {
  const data = Buffer.alloc(samples * 2);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVE', 8);
  header.write('fmt ', 12);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(16000, 24);
  header.writeUInt32LE(32000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

// ---- uploads ---------------------------------------------------------------------------------

describe('upload: POST /uploads/<ticket>', () => {
  it('stores a file: 201 with dir, name, size, sha256 and modified_at, Location, the request id', async () => {
    const bytes = randomBytes(100_000);
    const answer = await upload([dir('files'), file('notes.txt', bytes)], { requestId: 'req-201' });
    expect(answer.status).toBe(201);
    expect(answer.json).toEqual({ dir: 'files', name: 'notes.txt', size: bytes.length, sha256: sha(bytes), modified_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    expect(answer.headers['location']).toBe('/v1/system/files?dir=files&name=notes.txt');
    expect(answer.headers['x-request-id']).toBe('req-201');
    expect(sha(await storedBytes('files', 'notes.txt'))).toBe(sha(bytes));
    expect(await findFile(testDb.db, 'files', 'notes.txt')).toMatchObject({ size: bytes.length, sha256: sha(bytes), storageKey: 'files/notes.txt', audio: null });
    expect(await scratchDirs()).toEqual([]);
  });

  it('points Location at a URL that answers the file: the list filtered by dir and name', async () => {
    const first = await upload([dir('files'), file('located-a.txt', 'A')]);
    const second = await upload([dir('files'), file('located-b.txt', 'BB')]);
    expect([first.status, second.status]).toEqual([201, 201]);
    const location = new URL(String(second.headers['location']), 'http://gateway.test');
    expect(location.pathname).toBe('/v1/system/files');
    const query = Object.fromEntries(location.searchParams);
    expect(query).toEqual({ dir: 'files', name: 'located-b.txt' });
    const listed = await listFiles({ db: testDb.db } as SystemDeps, { request_id: uniqueId('r'), params: {}, query } as RequestOf<'system.file.list'>);
    expect(listed).toEqual({ status: 200, body: { files: [second.json] } });
    // The same filter answers an empty list for a name that is not there, and 400 for one that cannot be.
    const none = await listFiles({ db: testDb.db } as SystemDeps, { request_id: uniqueId('r'), params: {}, query: { name: 'absent.txt' } } as RequestOf<'system.file.list'>);
    expect(none.body).toEqual({ files: [] });
    const bad = await listFiles({ db: testDb.db } as SystemDeps, { request_id: uniqueId('r'), params: {}, query: { name: '../x' } } as RequestOf<'system.file.list'>).catch((err: ApiError) => err);
    expect(bad).toMatchObject({ status: 400, code: 'validation_error' });
  });

  it('takes `dir` after the file too, and keeps only the last segment of a filename with a path', async () => {
    const answer = await upload([file('C:\\certs\\device.crt', 'CERT'), dir('files')]);
    expect(answer.status).toBe(201);
    expect(answer.json).toMatchObject({ dir: 'files', name: 'device.crt', size: 4 });
    const slashed = await upload([dir('files'), file('some/path/ca-bundle.pem', 'PEM')]);
    expect(slashed.json).toMatchObject({ name: 'ca-bundle.pem' });
  });

  it('firmware/ takes .bin only; files/ takes its allowlist, any case; anything else is 400', async () => {
    expect((await upload([dir('firmware'), file('fw-2.0.bin', randomBytes(2000))])).status).toBe(201);
    expect((await upload([dir('firmware'), file('FW-UPPER.BIN', 'x')])).status).toBe(201);
    for (const name of ['fw.txt', 'fw.mp3', 'fw', 'fw.bin.gz']) {
      const answer = await upload([dir('firmware'), file(name, 'x')]);
      expect({ name, status: answer.status, code: answer.json['code'] }).toEqual({ name, status: 400, code: 'validation_error' });
      expect(answer.json['error']).toMatch(/firmware\/ takes \.bin/);
    }
    for (const ext of ['.wav', '.pem', '.crt', '.cer', '.der', '.txt', '.json', '.TXT', '.Json']) {
      const answer = await upload([dir('files'), file(`allow${ext.slice(1)}${ext}`, 'content')]);
      expect({ ext, status: answer.status }).toEqual({ ext, status: 201 });
    }
    for (const name of ['image.bin', 'run.exe', 'noext', 'clip.mp4', 'page.html']) {
      const answer = await upload([dir('files'), file(name, 'x')]);
      expect({ name, status: answer.status, code: answer.json['code'] }).toEqual({ name, status: 400, code: 'validation_error' });
    }
  });

  it('refuses names outside the rules (400) and stores nothing', async () => {
    for (const name of ['.hidden.txt', '-dash.txt', 'with space.txt', 'semi;colon.txt', 'é.txt', `${'a'.repeat(61)}.txt`]) {
      const answer = await upload([dir('files'), file(name, 'x')]);
      expect({ name, status: answer.status, code: answer.json['code'] }).toEqual({ name, status: 400, code: 'validation_error' });
    }
    expect((await upload([dir('files'), file(`${'a'.repeat(60)}.txt`, 'x')])).status).toBe(201);
    expect(await scratchDirs()).toEqual([]);
  });

  it('answers 400 for a missing dir or file, a bad dir, a second file part or a text `file`', async () => {
    const cases: Array<[string, Part[]]> = [
      ['no dir', [file('a1.txt', 'x')]],
      ['no file', [dir('files')]],
      ['bad dir', [dir('etc'), file('a2.txt', 'x')]],
      ['bad dir after file', [file('a3.txt', 'x'), dir('../files')]],
      ['two files', [dir('files'), file('a4.txt', 'x'), file('a5.txt', 'y')]],
      ['file as text', [dir('files'), { field: 'file', value: 'not a file part' }]],
      ['other file part', [dir('files'), { field: 'upload', filename: 'a6.txt', data: Buffer.from('x') }]],
      ['dir twice', [dir('files'), dir('firmware'), file('a7.txt', 'x')]],
    ];
    for (const [what, parts] of cases) {
      const answer = await upload(parts, { requestId: `req-${what.replace(/ /g, '-')}` });
      expect({ what, status: answer.status, code: answer.json['code'], request_id: answer.json['request_id'] }).toEqual({
        what,
        status: 400,
        code: 'validation_error',
        request_id: `req-${what.replace(/ /g, '-')}`,
      });
      expect(typeof answer.json['error']).toBe('string');
    }
    for (const name of ['a1.txt', 'a2.txt', 'a3.txt', 'a4.txt', 'a5.txt', 'a6.txt', 'a7.txt']) expect(await findFile(testDb.db, 'files', name)).toBeNull();
  });

  it('answers 400 for a malformed multipart body and 415 for another content type', async () => {
    const truncated = multipart([dir('files'), file('cut.txt', 'abc')]);
    const res = await fetch(ticketUrl(), { method: 'POST', body: truncated.body.subarray(0, truncated.body.length - 20), headers: { 'Content-Type': truncated.contentType } });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: 'validation_error' });
    const json = await fetch(ticketUrl(), { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json' } });
    expect(json.status).toBe(415);
    expect(await json.json()).toMatchObject({ code: 'unsupported_media_type' });
    expect(await findFile(testDb.db, 'files', 'cut.txt')).toBeNull();
  });

  it('never overwrites: a name clash is 409 conflict and the stored bytes stay', async () => {
    expect((await upload([dir('files'), file('keep.json', '{"v":1}')])).status).toBe(201);
    const again = await upload([dir('files'), file('keep.json', '{"v":2}')], { requestId: 'req-clash' });
    expect(again.status).toBe(409);
    expect(again.json).toEqual({ error: expect.stringContaining('files/keep.json'), code: 'conflict', request_id: 'req-clash' });
    expect((await storedBytes('files', 'keep.json')).toString()).toBe('{"v":1}');
    // The same name in the other directory is another file.
    expect((await upload([dir('firmware'), file('keep.bin', 'x')])).status).toBe(201);
    expect((await upload([dir('files'), file('keep.bin', 'x')])).status).toBe(400);
  });

  it('of concurrent uploads of one name, one is stored and the others are 409', async () => {
    const bodies = Array.from({ length: 4 }, (_, i) => Buffer.from(`racer ${i}`));
    const answers = await Promise.all(bodies.map((b) => upload([dir('files'), file('race.txt', b)])));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409]);
    const winner = answers.find((a) => a.status === 201)!;
    expect(sha(await storedBytes('files', 'race.txt'))).toBe(winner.json['sha256']);
  });

  it('refuses a clash as the file part starts, without reading the file, when dir came first', async () => {
    expect((await upload([dir('firmware'), file('early.bin', 'x')])).status).toBe(201);
    const answer = await streamUpload(ticketUrl(), { dirValue: 'firmware', filename: 'early.bin', fileBytes: 30 * MB });
    expect(answer.status).toBe(409);
    expect(answer.json['code']).toBe('conflict');
    expect(answer.headers['connection']).toBe('close');
    expect(answer.written).toBeLessThan(answer.total / 2);
    expect((await storedBytes('firmware', 'early.bin')).toString()).toBe('x');
    const badName = await streamUpload(ticketUrl(), { dirValue: 'firmware', filename: 'early.exe', fileBytes: 30 * MB });
    expect(badName.status).toBe(400);
    expect(badName.written).toBeLessThan(badName.total / 2);
  });

  it('replaces bytes that no record owns (left by an upload that never committed)', async () => {
    const orphan = path.join(root, 'orphan-source');
    await writeFile(orphan, 'stale');
    expect(await storage.putNew('files/orphan.txt', orphan, 5)).toBe(true);
    const answer = await upload([dir('files'), file('orphan.txt', 'fresh bytes')]);
    expect(answer.status).toBe(201);
    expect((await storedBytes('files', 'orphan.txt')).toString()).toBe('fresh bytes');
  });

  it('runs the audio check on an .mp3 in files/: 201 with the audio object', async () => {
    const bytes = mp3Frames(60);
    const answer = await upload([dir('files'), file('chime.mp3', bytes)]);
    expect(answer.status).toBe(201);
    expect(answer.json).toMatchObject({ dir: 'files', name: 'chime.mp3', size: bytes.length, sha256: sha(bytes) });
    const audio = answer.json['audio'] as Record<string, unknown>;
    expect(audio).toMatchObject({ playable: true, summary: expect.objectContaining({ size_bytes: bytes.length }) });
    expect(Array.isArray(audio['issues'])).toBe(true);
    expect((await findFile(testDb.db, 'files', 'chime.mp3'))?.audio).toEqual(audio);
  });

  it('accepts an upper-case .MP3, flagged by the audio check', async () => {
    const answer = await upload([dir('files'), file('LOUD.MP3', mp3Frames(40))]);
    expect(answer.status).toBe(201);
    const issues = (answer.json['audio'] as { issues: Array<{ code: string }> }).issues.map((i) => i.code);
    expect(issues).toContain('uppercase_extension');
  });

  it('refuses an .mp3 that holds no MP3 audio (a WAV renamed .mp3): 400 with the reason', async () => {
    const answer = await upload([dir('files'), file('renamed.mp3', wavFile(8000))]);
    expect(answer.status).toBe(400);
    expect(answer.json['code']).toBe('validation_error');
    expect(answer.json['error']).toMatch(/WAV/);
    expect(answer.json['error']).toMatch(/\(not_mp3\)/);
    expect(await findFile(testDb.db, 'files', 'renamed.mp3')).toBeNull();
    // The same bytes are a fine .wav; an .mp3 is only checked in files/ (firmware/ refuses it by name).
    expect((await upload([dir('files'), file('renamed.wav', wavFile(8000))])).status).toBe(201);
  });
});

describe('upload size limit', () => {
  it('a file of 32 MB + 1 byte is 413 payload_too_large with Connection: close; nothing is stored', async () => {
    const answer = await streamUpload(ticketUrl(), { dirValue: 'files', filename: 'big.txt', fileBytes: MAX + 1 });
    expect(answer.status).toBe(413);
    expect(answer.json).toMatchObject({ code: 'payload_too_large', error: expect.stringContaining('32 MB') });
    expect(answer.headers['connection']).toBe('close');
    expect(await findFile(testDb.db, 'files', 'big.txt')).toBeNull();
    await waitFor(async () => (await scratchDirs()).length === 0, { what: 'scratch removed' });
  });

  it('stops reading at the limit: a larger chunked body is cut, not drained', async () => {
    const answer = await streamUpload(ticketUrl(), { dirValue: 'files', filename: 'huge.txt', fileBytes: 128 * MB, chunked: true });
    expect(answer.status).toBe(413);
    // The server read a little over 32 MB; the socket buffers hold a few MB more at most.
    expect(answer.written).toBeLessThan(MAX + 16 * MB);
    expect(answer.total).toBeGreaterThan(128 * MB);
  });

  it('refuses a declared Content-Length over the limit before reading anything', async () => {
    const answer = await streamUpload(ticketUrl(), { dirValue: 'files', filename: 'declared.txt', fileBytes: 64 * MB });
    expect(answer.status).toBe(413);
    expect(answer.json['code']).toBe('payload_too_large');
    expect(answer.written).toBeLessThan(16 * MB);
  });

  it('streams the file to disk as it arrives (nothing waits in memory for the end of the body)', async () => {
    let scratchSize = 0;
    const answer = await streamUpload(ticketUrl(), {
      dirValue: 'firmware',
      filename: 'streamed.bin',
      fileBytes: 24 * MB,
      pauseAfter: 12 * MB,
      onPause: () =>
        waitFor(
          async () => {
            const [entry] = await scratchDirs();
            if (!entry) return false;
            scratchSize = (await stat(path.join(storage.incomingDir, entry, 'body')).catch(() => ({ size: 0 }))).size;
            return scratchSize >= 8 * MB;
          },
          { what: 'the first half on disk', timeoutMs: 10_000 },
        ).then(() => undefined),
    });
    expect(scratchSize).toBeGreaterThanOrEqual(8 * MB);
    expect(answer.status).toBe(201);
    expect(answer.json).toMatchObject({ size: 24 * MB, sha256: sha(Buffer.alloc(24 * MB, 0x5a)) });
  });

  it('takes a file of exactly the limit', async () => {
    const small = await startFileServer({ config: { FILES_HTTP_PORT: 0, FILES_HTTP_HOST: '127.0.0.1', UPLOAD_MAX_BYTES: 1000 }, db: testDb.db, storage, tokens, logger });
    try {
      const url = (name: string) => `http://127.0.0.1:${small.port}/uploads/${tokens.signUploadTicket({ partnerId: 'p', requestId: name, expiresAt: Math.floor(Date.now() / 1000) + 60 })}`;
      expect((await upload([dir('files'), file('limit.txt', Buffer.alloc(1000, 1))], { url: url('a') })).status).toBe(201);
      const over = await upload([dir('files'), file('limit2.txt', Buffer.alloc(1001, 1))], { url: url('b') });
      expect(over.status).toBe(413);
      expect(over.json['error']).toMatch(/larger than 1000 bytes/);
    } finally {
      await small.close();
    }
  });
});

describe('upload tickets', () => {
  const nowS = () => Math.floor(Date.now() / 1000);

  it('refuses a tampered, expired, reused or foreign ticket with 403 and reads no body', async () => {
    const good = ticketUrl();
    const token = good.slice(`${base}/uploads/`.length);
    const [payload = '', sig = ''] = token.split('.');
    const forged = Buffer.from(JSON.stringify({ k: 'u', p: 'someone-else', r: 'r', e: nowS() + 60 })).toString('base64url');
    const expired = tokens.signUploadTicket({ partnerId: 'p', requestId: 'r', expiresAt: nowS() - 1 });
    const otherKey = new UrlTokens(`${SECRET}-other`).signUploadTicket({ partnerId: 'p', requestId: 'r', expiresAt: nowS() + 60 });
    const download = tokens.signDownload({ dir: 'files', name: 'notes.txt', expiresAt: nowS() + 60 });
    for (const [what, ticket] of [
      ['forged', `${forged}.${sig}`],
      ['expired', expired],
      ['other key', otherKey],
      ['download token', download],
      ['garbage', 'not-a-ticket'],
    ] as const) {
      const answer = await upload([dir('files'), file(`t-${what.replace(/ /g, '')}.txt`, 'x')], { url: `${base}/uploads/${ticket}`, requestId: `req-${what.replace(/ /g, '')}` });
      expect({ what, status: answer.status, code: answer.json['code'], request_id: answer.json['request_id'] }).toEqual({
        what,
        status: 403,
        code: 'forbidden',
        request_id: `req-${what.replace(/ /g, '')}`,
      });
    }
    expect(payload.length).toBeGreaterThan(0);
    expect((await upload([dir('files'), file('ticket-once.txt', 'x')], { url: good })).status).toBe(201);
    const reused = await upload([dir('files'), file('ticket-twice.txt', 'x')], { url: good });
    expect(reused.status).toBe(403);
    expect(reused.json['error']).toMatch(/used already/);
    const big = await streamUpload(`${base}/uploads/${expired}`, { dirValue: 'files', filename: 'never.txt', fileBytes: 30 * MB });
    expect(big.status).toBe(403);
    expect(big.written).toBeLessThan(big.total / 2);
  });

  it('answers unknown paths 404 and other methods 405', async () => {
    const unknown = await fetch(`${base}/elsewhere`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'not_found' });
    const get = await fetch(ticketUrl());
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });
});

// ---- downloads -------------------------------------------------------------------------------

describe('download: GET /d/<token>', () => {
  let bytes: Buffer;

  beforeAll(async () => {
    bytes = mp3Frames(100);
    const answer = await upload([dir('files'), file('download.mp3', bytes)]);
    expect(answer.status).toBe(201);
  });

  it('streams the exact bytes with Content-Length and application/octet-stream', async () => {
    const url = await urls.downloadUrl({ dir: 'files', name: 'download.mp3', storageKey: 'files/download.mp3' }, { transferId: 'xfer-1' });
    expect(url.startsWith(`${base}/d/`)).toBe(true);
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect(res.headers.get('content-length')).toBe(String(bytes.length));
    const body = Buffer.from(await res.arrayBuffer());
    expect(sha(body)).toBe(sha(bytes));
    const head = await fetch(url, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(bytes.length));
  });

  it('tells who downloads (the transfer id of a url_token URL)', async () => {
    const seen: Array<{ dir: string; name: string; transferId?: string }> = [];
    const watched = await startFileServer({
      config: { FILES_HTTP_PORT: 0, FILES_HTTP_HOST: '127.0.0.1', UPLOAD_MAX_BYTES: MAX },
      db: testDb.db,
      storage,
      tokens,
      logger,
      onDownload: (d) => seen.push(d),
    });
    try {
      const token = tokens.signDownload({ dir: 'files', name: 'download.mp3', expiresAt: Math.floor(Date.now() / 1000) + 60, transferId: 'xfer-7' });
      const res = await fetch(`http://127.0.0.1:${watched.port}/d/${token}`);
      expect(sha(Buffer.from(await res.arrayBuffer()))).toBe(sha(bytes));
      expect(seen).toEqual([{ dir: 'files', name: 'download.mp3', transferId: 'xfer-7' }]);
    } finally {
      await watched.close();
    }
  });

  it('refuses an expired or tampered token with 403', async () => {
    const expired = tokens.signDownload({ dir: 'files', name: 'download.mp3', expiresAt: Math.floor(Date.now() / 1000) - 1 });
    const res = await fetch(`${base}/d/${expired}`);
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ code: 'forbidden', error: expect.stringMatching(/expired/), request_id: expect.any(String) });
    const good = (await urls.downloadUrl({ dir: 'files', name: 'download.mp3', storageKey: 'files/download.mp3' })).slice(`${base}/d/`.length);
    const [, sig = ''] = good.split('.');
    const forged = Buffer.from(JSON.stringify({ k: 'd', d: 'files', n: 'notes.txt', e: Math.floor(Date.now() / 1000) + 600 })).toString('base64url');
    const tampered = await fetch(`${base}/d/${forged}.${sig}`);
    expect(tampered.status).toBe(403);
    expect(await tampered.json()).toMatchObject({ code: 'forbidden' });
    const ticket = await fetch(`${base}/d/${ticketUrl().split('/').pop()}`);
    expect(ticket.status).toBe(403);
  });

  it('answers 404 when the file is gone', async () => {
    const token = tokens.signDownload({ dir: 'firmware', name: 'never-uploaded.bin', expiresAt: Math.floor(Date.now() / 1000) + 60 });
    const res = await fetch(`${base}/d/${token}`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: 'not_found' });
  });
});
