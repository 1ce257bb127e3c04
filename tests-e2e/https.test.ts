import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { partnerWithKey } from './support/api';
import { startExtraGateway } from './support/gateway-process';

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown>;
}

function request(url: string, headers: Record<string, string>, ca?: Buffer): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const client = url.startsWith('https:') ? https : http;
    const req = client.get(url, { headers, ...(ca ? { ca } : {}) }, (res) => {
      let text = '';
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text ? JSON.parse(text) : {} }));
    });
    req.on('error', reject);
  });
}

describe('HTTPS', () => {
  let dir: string;
  let cert: Buffer;
  let key: string;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-tls-'));
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost',
      '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
    cert = fs.readFileSync(path.join(dir, 'cert.pem'));
    key = (await partnerWithKey()).key;
  });

  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('serves TLS when given a certificate and key, in production mode too', async () => {
    const gw = await startExtraGateway({
      TLS_CERT_FILE: path.join(dir, 'cert.pem'),
      TLS_KEY_FILE: path.join(dir, 'key.pem'),
      NODE_ENV: 'production',
    });
    try {
      const res = await request(`https://127.0.0.1:${gw.port}/v1/account`, { Authorization: `Bearer ${key}` }, cert);
      expect(res.status).toBe(200);
      expect(res.headers['x-request-id']).toBeDefined();
      await expect(request(`http://127.0.0.1:${gw.port}/v1/account`, {})).rejects.toThrow();
    } finally {
      await gw.stop();
    }
  });

  it('in production refuses plain HTTP unless a trusted proxy says the client used HTTPS', async () => {
    const gw = await startExtraGateway({ NODE_ENV: 'production', TRUSTED_PROXIES: '127.0.0.1' });
    const untrusting = await startExtraGateway({ NODE_ENV: 'production' });
    try {
      const plain = await request(`http://127.0.0.1:${gw.port}/v1/account`, { Authorization: `Bearer ${key}` });
      expect([plain.status, plain.body.code]).toEqual([403, 'https_required']);
      expect(plain.headers['x-request-id']).toBeDefined();
      const proxied = await request(`http://127.0.0.1:${gw.port}/v1/account`, { Authorization: `Bearer ${key}`, 'X-Forwarded-Proto': 'https' });
      expect(proxied.status).toBe(200);
      const spoofed = await request(`http://127.0.0.1:${untrusting.port}/v1/account`, { Authorization: `Bearer ${key}`, 'X-Forwarded-Proto': 'https' });
      expect([spoofed.status, spoofed.body.code]).toEqual([403, 'https_required']);
    } finally {
      await gw.stop();
      await untrusting.stop();
    }
  });
});
