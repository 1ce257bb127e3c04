import { createHash, randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { NotFoundError } from '@fleet/service-kit';
import { rejectionOf } from '@fleet/test-kit';
import { createStorage, LocalFileStorage, S3FileStorage } from '../src/storage';
import type { FileStorage } from '../src/storage/storage';

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const sha = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'fleet-storage-test-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function source(bytes: Buffer, dir = scratch): Promise<string> {
  const file = path.join(dir, `src-${randomBytes(6).toString('hex')}`);
  await writeFile(file, bytes);
  return file;
}

/** What every backend promises: exclusive putNew, open, remove. */
function behavesAsFileStorage(make: () => FileStorage) {
  it('stores new bytes and reads them back', async () => {
    const storage = make();
    const bytes = randomBytes(10_000);
    expect(await storage.putNew('files/a.txt', await source(bytes), bytes.length)).toBe(true);
    expect(sha(await readAll(await storage.open('files/a.txt')))).toBe(sha(bytes));
  });

  it('never overwrites: a second putNew of a key is false and the first bytes stay', async () => {
    const storage = make();
    const first = Buffer.from('first');
    const second = Buffer.from('second version');
    expect(await storage.putNew('firmware/fw.bin', await source(first), first.length)).toBe(true);
    expect(await storage.putNew('firmware/fw.bin', await source(second), second.length)).toBe(false);
    expect((await readAll(await storage.open('firmware/fw.bin'))).toString()).toBe('first');
  });

  it('of concurrent putNew calls of one key, exactly one wins and its bytes are stored', async () => {
    const storage = make();
    const contents = Array.from({ length: 8 }, (_, i) => Buffer.from(`writer ${i} ${randomBytes(2000).toString('hex')}`));
    const paths = await Promise.all(contents.map((c) => source(c)));
    const results = await Promise.all(paths.map((p, i) => storage.putNew('files/race.txt', p, contents[i]!.length)));
    expect(results.filter(Boolean)).toHaveLength(1);
    const winner = contents[results.indexOf(true)]!;
    expect((await readAll(await storage.open('files/race.txt'))).equals(winner)).toBe(true);
  });

  it('opening a missing key is a NotFoundError; removing one is fine; a removed key takes new bytes', async () => {
    const storage = make();
    await rejectionOf(storage.open('files/none.txt'), NotFoundError);
    await storage.remove('files/none.txt');
    const bytes = Buffer.from('again');
    expect(await storage.putNew('files/b.txt', await source(Buffer.from('old')), 3)).toBe(true);
    await storage.remove('files/b.txt');
    await rejectionOf(storage.open('files/b.txt'), NotFoundError);
    expect(await storage.putNew('files/b.txt', await source(bytes), bytes.length)).toBe(true);
    expect((await readAll(await storage.open('files/b.txt'))).toString()).toBe('again');
  });
}

describe('LocalFileStorage', () => {
  let n = 0;
  const roots: string[] = [];
  const make = (): LocalFileStorage => {
    const root = path.join(scratch, `root-${n++}`);
    roots.push(root);
    return new LocalFileStorage(root);
  };

  behavesAsFileStorage(make);

  it('keeps key <dir>/<name> as the file <root>/<dir>/<name>, linked from a source on the same file system', async () => {
    const storage = make();
    const bytes = Buffer.from('linked');
    const src = await source(bytes);
    expect(await storage.putNew('files/c.txt', src, bytes.length)).toBe(true);
    const target = path.join(storage.root, 'files', 'c.txt');
    expect(await readFile(target, 'utf8')).toBe('linked');
    expect(statSync(target).ino).toBe(statSync(src).ino);
    expect(await storage.directUrl()).toBeUndefined();
  });

  const shm = '/dev/shm';
  const otherFs = existsSync(shm) && statSync(shm).dev !== statSync(tmpdir()).dev;
  (otherFs ? it : it.skip)('copies a source from another file system through its staging area, still exclusively', async () => {
    const storage = make();
    const far = await mkdtemp(path.join(shm, 'fleet-storage-test-'));
    try {
      const bytes = randomBytes(50_000);
      expect(await storage.putNew('firmware/far.bin', await source(bytes, far), bytes.length)).toBe(true);
      expect(sha(await readFile(path.join(storage.root, 'firmware', 'far.bin')))).toBe(sha(bytes));
      expect(await storage.putNew('firmware/far.bin', await source(Buffer.from('x'), far), 1)).toBe(false);
      expect(await readdir(path.join(storage.root, '.staging'))).toEqual([]);
    } finally {
      await rm(far, { recursive: true, force: true });
    }
  });

  it('refuses keys that would leave its directory', async () => {
    const storage = make();
    const src = await source(Buffer.from('x'));
    for (const key of ['../x.txt', 'files/../../x.txt', '/etc/x.txt', 'files/.hidden', 'files', 'files//x.txt', 'files/a\\b.txt']) {
      await expect(storage.putNew(key, src, 1)).rejects.toThrow(/invalid storage key/);
    }
  });

  it('refuses a source whose size is not the one given', async () => {
    const storage = make();
    await expect(storage.putNew('files/d.txt', await source(Buffer.from('four')), 5)).rejects.toThrow(/holds 4 bytes/);
  });

  it('is what createStorage gives for FILE_STORAGE=local, relative to the working directory', () => {
    const storage = createStorage({ FILE_STORAGE: 'local', FILE_STORAGE_DIR: '.fleet/files', S3_REGION: 'us-east-1', S3_FORCE_PATH_STYLE: false, S3_PREFIX: '' });
    expect(storage).toBeInstanceOf(LocalFileStorage);
    expect((storage as LocalFileStorage).root).toBe(path.resolve(process.cwd(), '.fleet/files'));
  });
});

/**
 * A stand-in for S3: no S3-compatible server (MinIO or other) runs on this machine, so this
 * HTTP fake implements just what the backend uses, path-style: PutObject (honouring
 * `If-None-Match: *` with 412, as S3 does), GetObject (404 NoSuchKey) and DeleteObject. It does
 * not check signatures; the tests check that requests are signed and what the presigned URL
 * looks like.
 */
class FakeS3 {
  readonly objects = new Map<string, Buffer>();
  readonly requests: Array<{ method: string; url: string; headers: IncomingHttpHeaders }> = [];
  private server: Server | undefined;
  port = 0;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      this.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
      const key = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname.slice(1));
      const error = (status: number, code: string) => {
        res.writeHead(status, { 'Content-Type': 'application/xml' });
        res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${code}</Message><Key>${key}</Key></Error>`);
      };
      if (req.method === 'PUT') {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          if (req.headers['if-none-match'] === '*' && this.objects.has(key)) return error(412, 'PreconditionFailed');
          const body = Buffer.concat(chunks);
          this.objects.set(key, body);
          res.writeHead(200, { ETag: `"${createHash('md5').update(body).digest('hex')}"` });
          res.end();
        });
        return;
      }
      if (req.method === 'GET') {
        const body = this.objects.get(key);
        if (!body) return error(404, 'NoSuchKey');
        res.writeHead(200, { 'Content-Length': String(body.length), 'Content-Type': 'application/octet-stream' });
        res.end(body);
        return;
      }
      if (req.method === 'DELETE') {
        this.objects.delete(key);
        res.writeHead(204);
        res.end();
        return;
      }
      error(405, 'MethodNotAllowed');
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server!.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

describe('S3FileStorage (against an in-test S3 fake)', () => {
  const fake = new FakeS3();
  const credentials = { accessKeyId: 'AKIATESTTESTTEST', secretAccessKey: 'test-secret-key' };
  let n = 0;
  const make = (prefix = `t${n++}/`): S3FileStorage =>
    new S3FileStorage({ bucket: 'fleet-files', region: 'eu-west-1', endpoint: `http://127.0.0.1:${fake.port}`, forcePathStyle: true, prefix, credentials });

  beforeAll(() => fake.start());
  afterAll(() => fake.stop());

  behavesAsFileStorage(make);

  it('sends one signed, conditional PutObject with the length, under bucket and prefix', async () => {
    const storage = make('fleet/');
    const bytes = randomBytes(4096);
    const before = fake.requests.length;
    expect(await storage.putNew('files/e.wav', await source(bytes), bytes.length)).toBe(true);
    const puts = fake.requests.slice(before).filter((r) => r.method === 'PUT');
    expect(puts).toHaveLength(1);
    const put = puts[0]!;
    expect(new URL(put.url, 'http://x').pathname).toBe('/fleet-files/fleet/files/e.wav');
    expect(put.headers['if-none-match']).toBe('*');
    expect(put.headers['content-length']).toBe(String(bytes.length));
    expect(put.headers['authorization']).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIATESTTESTTEST\/\d{8}\/eu-west-1\/s3\/aws4_request/);
    expect(fake.objects.get('fleet-files/fleet/files/e.wav')?.equals(bytes)).toBe(true);
  });

  it('gives a presigned GET URL that fetches the object', async () => {
    const storage = make('fleet/');
    const bytes = Buffer.from('presigned bytes');
    await storage.putNew('files/f.txt', await source(bytes), bytes.length);
    const url = new URL(await storage.directUrl('files/f.txt', 600));
    expect(`${url.origin}${url.pathname}`).toBe(`http://127.0.0.1:${fake.port}/fleet-files/fleet/files/f.txt`);
    expect(url.searchParams.get('X-Amz-Algorithm')).toBe('AWS4-HMAC-SHA256');
    expect(url.searchParams.get('X-Amz-Expires')).toBe('600');
    expect(url.searchParams.get('X-Amz-Credential')).toMatch(/^AKIATESTTESTTEST\/\d{8}\/eu-west-1\/s3\/aws4_request$/);
    expect(url.searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
    expect(url.toString()).not.toContain(';');
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).toString()).toBe('presigned bytes');
  });

  it('caps a presigned URL at the 7 days SigV4 allows', async () => {
    const url = new URL(await make().directUrl('files/g.txt', 30 * 24 * 3600));
    expect(url.searchParams.get('X-Amz-Expires')).toBe(String(7 * 24 * 3600));
  });

  it('is what createStorage gives for FILE_STORAGE=s3', () => {
    const storage = createStorage({
      FILE_STORAGE: 's3',
      FILE_STORAGE_DIR: '.fleet/files',
      S3_BUCKET: 'b',
      S3_REGION: 'eu-west-1',
      S3_ENDPOINT: 'http://127.0.0.1:1',
      S3_FORCE_PATH_STYLE: true,
      S3_PREFIX: 'p/',
    });
    expect(storage).toBeInstanceOf(S3FileStorage);
    expect((storage as S3FileStorage).objectKey('files/a.mp3')).toBe('p/files/a.mp3');
    expect(() => createStorage({ FILE_STORAGE: 's3', FILE_STORAGE_DIR: 'x', S3_REGION: 'r', S3_FORCE_PATH_STYLE: false, S3_PREFIX: '' })).toThrow(/S3_BUCKET/);
  });
});
