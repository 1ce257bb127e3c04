import { e2eFleet } from './fleet-env';
import type { Answer } from './api';

/** A short mono MPEG-2 Layer III clip, 16 kHz, 48 kbps: `frames` frames of 216 bytes (header FF F3 68 C4, silent body). */
export function mp3(frames: number, seed = 0): Buffer {
  const frame = Buffer.alloc(216, 0);
  frame.set([0xff, 0xf3, 0x68, 0xc4]);
  const out = Buffer.concat(Array.from({ length: frames }, () => frame));
  // Bytes inside the frame bodies make clips of the same length differ (their SHA-256 too).
  out[100] = seed & 0xff;
  return out;
}

/** Uploads a platform file through the gateway (multipart: `dir`, then `file`). */
export async function uploadPlatformFile(key: string, dir: string, name: string, bytes: Buffer): Promise<Answer> {
  const form = new FormData();
  form.set('dir', dir);
  form.set('file', new Blob([bytes]), name);
  const res = await fetch(`${e2eFleet().gatewayUrl}/v1/system/files`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: form });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}
