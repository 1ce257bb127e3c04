import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { e2eFleet } from './fleet-env';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');

/** Runs the staff CLI exactly as staff do (`npm run -s admin -- ...`), against the suite's databases. */
export async function admin(...argv: string[]): Promise<Record<string, unknown>> {
  return adminAt(e2eFleet().databasePrefix, ...argv);
}

/** The staff CLI against the databases of a fleet started with this database prefix. */
export async function adminAt(databasePrefix: string, ...argv: string[]): Promise<Record<string, unknown>> {
  // Each command runs in the service that owns its data, on that service's database.
  const owner = { org: 'device_registry', meter: 'meter' }[argv[0] ?? ''] ?? 'gateway';
  const env = { ...process.env, DATABASE_URL: `postgresql://postgres@127.0.0.1:5432/${databasePrefix}${owner}` };
  const { stdout } = await run(process.execPath, [path.join(ROOT, 'scripts', 'admin.js'), ...argv], { env, cwd: ROOT });
  return JSON.parse(stdout) as Record<string, unknown>;
}

/** Runs the staff CLI expecting a failure; returns its exit code and stderr. */
export async function adminFails(...argv: string[]): Promise<{ code: number; stderr: string; stdout: string }> {
  try {
    await admin(...argv);
  } catch (err) {
    const e = err as { code: number; stderr: string; stdout: string };
    return { code: e.code, stderr: e.stderr, stdout: e.stdout };
  }
  throw new Error(`admin ${argv.join(' ')} succeeded unexpectedly`);
}

export async function partnerWithKey(flags: string[] = [], databasePrefix = e2eFleet().databasePrefix): Promise<{ id: string; key: string; keyPrefix: string; name: string }> {
  const name = `Partner ${Math.random().toString(36).slice(2, 8)}`;
  const partner = await adminAt(databasePrefix, 'partner', 'create', '--name', name, ...flags);
  const key = await adminAt(databasePrefix, 'key', 'issue', '--partner', String(partner.id));
  return { id: String(partner.id), name, key: String(key.key), keyPrefix: String(key.key_prefix) };
}

export interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
  text: string;
}

export interface ApiOptions {
  key?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export async function api(method: string, pathAndQuery: string, options: ApiOptions = {}): Promise<Answer> {
  return apiAt(e2eFleet().gatewayUrl, method, pathAndQuery, options);
}

/** One request to the gateway at gatewayUrl; the body is parsed when it is JSON. */
export async function apiAt(gatewayUrl: string, method: string, pathAndQuery: string, options: ApiOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...(options.key ? { Authorization: `Bearer ${options.key}` } : {}), ...options.headers };
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const res = await fetch(`${gatewayUrl}${pathAndQuery}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    parsed = {};
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}
